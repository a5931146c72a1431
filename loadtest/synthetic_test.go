package loadtest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/loadtest/trace"
)

// smallSynthetic is a quick workload with short prompts, several turns per
// conversation and system prompts both shorter and longer than a block.
func smallSynthetic(seed int64) SyntheticConfig {
	return SyntheticConfig{Seed: seed, Requests: 300, SystemPrompts: 5, SystemPromptTokens: [2]int{100, 3000},
		Conversations: 20, Turns: [2]int{2, 6}, UserTokens: [2]int{10, 400}, AnswerTokens: [2]int{10, 600},
		MaxPromptTokens: 6000}
}

func mustSynthesize(t *testing.T, cfg SyntheticConfig) []synthRequest {
	t.Helper()
	reqs, err := synthesize(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// commonPrefix returns the number of equal leading ids of a and b.
func commonPrefix(a, b []int64) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestSyntheticIsDeterministicForASeed(t *testing.T) {
	t.Parallel()
	a, err := Synthetic(smallSynthetic(7))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Synthetic(smallSynthetic(7))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same config gave two different workloads")
	}
	c, err := Synthetic(smallSynthetic(8))
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 gave the same workload")
	}
}

func TestSyntheticRequestsAreWellFormedMooncakeLines(t *testing.T) {
	t.Parallel()
	cfg := SyntheticConfig{Seed: 1}.withDefaults()
	reqs := mustSynthesize(t, SyntheticConfig{Seed: 1})
	if len(reqs) != cfg.Requests {
		t.Fatalf("%d requests, want %d", len(reqs), cfg.Requests)
	}
	if reqs[0].Timestamp != 0 {
		t.Fatalf("first timestamp %s, want 0", reqs[0].Timestamp)
	}
	convs := make(map[int]bool)
	for i, r := range reqs {
		if len(r.HashIDs) != trace.BlocksFor(r.InputLength) {
			t.Fatalf("request %d: %d ids for %d tokens", i, len(r.HashIDs), r.InputLength)
		}
		if i > 0 && r.Timestamp < reqs[i-1].Timestamp {
			t.Fatalf("request %d at %s, before request %d at %s", i, r.Timestamp, i-1, reqs[i-1].Timestamp)
		}
		if r.InputLength > cfg.MaxPromptTokens || r.OutputLength < cfg.AnswerTokens[0] || r.OutputLength > cfg.AnswerTokens[1] {
			t.Fatalf("request %d: input %d output %d out of bounds", i, r.InputLength, r.OutputLength)
		}
		sum := 0
		for _, s := range r.segs {
			sum += s.tokens
		}
		if sum != r.InputLength || len(r.segs) != 2*r.turn+2 {
			t.Fatalf("request %d (turn %d): %d segments of %d tokens, input %d", i, r.turn, len(r.segs), sum, r.InputLength)
		}
		convs[r.conv] = true
	}
	// Poisson arrivals: 1999 gaps of mean 1/Rate, relative deviation ~2%.
	want := float64(cfg.Requests-1) / cfg.Rate
	if got := reqs[len(reqs)-1].Timestamp.Seconds(); math.Abs(got-want) > 0.15*want {
		t.Fatalf("last arrival at %.1fs, want about %.1fs", got, want)
	}
	// Conversations end and are replaced: the working set moves.
	if len(convs) <= cfg.Conversations {
		t.Fatalf("%d conversations over the run, no more than the %d live ones", len(convs), cfg.Conversations)
	}
}

// TestSyntheticIDsMatchATokenLevelReference spells every prompt out token by
// token and names each block by its whole prefix, the way a Mooncake trace's
// chained hash does; the generator must give exactly the same ids.
func TestSyntheticIDsMatchATokenLevelReference(t *testing.T) {
	t.Parallel()
	for seed := range int64(2) {
		reqs := mustSynthesize(t, smallSynthetic(seed))
		ids := make(map[[32]byte]int64)
		for i, r := range reqs {
			var tokens []byte
			for _, s := range r.segs {
				for off := range s.tokens {
					tokens = binary.LittleEndian.AppendUint64(tokens, s.key<<32|uint64(off))
				}
			}
			var want []int64
			for end := trace.BlockTokens; ; end += trace.BlockTokens {
				end = min(end, r.InputLength)
				h := sha256.Sum256(tokens[:8*end])
				id, ok := ids[h]
				if !ok {
					id = int64(len(ids))
					ids[h] = id
				}
				want = append(want, id)
				if end == r.InputLength {
					break
				}
			}
			if !slices.Equal(r.HashIDs, want) {
				t.Fatalf("seed %d request %d: ids %v, token-level reference %v", seed, i, r.HashIDs, want)
			}
		}
	}
}

func TestSyntheticTurnsOfAConversationShareTheirPrefix(t *testing.T) {
	t.Parallel()
	reqs := mustSynthesize(t, smallSynthetic(3))
	byConv := make(map[int][]synthRequest)
	for _, r := range reqs {
		byConv[r.conv] = append(byConv[r.conv], r)
	}
	pairs := 0
	for conv, turns := range byConv {
		for j, later := range turns {
			if later.turn != j {
				t.Fatalf("conversation %d: request %d is turn %d", conv, j, later.turn)
			}
			for _, earlier := range turns[:j] {
				pairs++
				full := earlier.InputLength / trace.BlockTokens
				if later.InputLength <= earlier.InputLength {
					t.Fatalf("conversation %d: turn %d has %d tokens, turn %d has %d", conv, later.turn,
						later.InputLength, earlier.turn, earlier.InputLength)
				}
				if !slices.Equal(later.HashIDs[:full], earlier.HashIDs[:full]) {
					t.Fatalf("conversation %d: turn %d ids %v do not start with turn %d's full blocks %v", conv,
						later.turn, later.HashIDs, earlier.turn, earlier.HashIDs[:full])
				}
				// A partial last block holds fewer tokens than the later
				// turn's block at that place, so its id differs.
				if full < len(earlier.HashIDs) && later.HashIDs[full] == earlier.HashIDs[full] {
					t.Fatalf("conversation %d: turn %d's partial block %d has the id of turn %d's", conv,
						earlier.turn, full, later.turn)
				}
			}
		}
	}
	if pairs < 100 {
		t.Fatalf("only %d pairs of turns checked", pairs)
	}
}

func TestSyntheticConversationsOnOneSystemPromptShareExactlyItsFullBlocks(t *testing.T) {
	t.Parallel()
	reqs := mustSynthesize(t, smallSynthetic(4))
	shared, sharedBlocks := 0, 0
	for i, a := range reqs {
		for _, b := range reqs[:i] {
			if a.conv == b.conv {
				continue
			}
			want := 0
			if a.sys == b.sys {
				want = a.segs[0].tokens / trace.BlockTokens
				shared++
				sharedBlocks += want
			}
			if got := commonPrefix(a.HashIDs, b.HashIDs); got != want {
				t.Fatalf("conversations %d and %d on system prompts %d and %d (%d tokens) share %d blocks, want %d",
					a.conv, b.conv, a.sys, b.sys, a.segs[0].tokens, got, want)
			}
		}
	}
	if shared == 0 || sharedBlocks == 0 {
		t.Fatalf("%d pairs on one system prompt sharing %d blocks: the test proves nothing", shared, sharedBlocks)
	}
}

func TestSyntheticConversationsEndAtMaxPromptTokens(t *testing.T) {
	t.Parallel()
	cfg := SyntheticConfig{Requests: 300, Conversations: 5, SystemPromptTokens: [2]int{500, 1000},
		UserTokens: [2]int{100, 500}, AnswerTokens: [2]int{200, 1000}, Turns: [2]int{20, 20}, MaxPromptTokens: 3000}
	reqs := mustSynthesize(t, cfg)
	convs := make(map[int]bool)
	for i, r := range reqs {
		// Turn k has at least 500 + 300k + 100 tokens: turn 9 would have
		// 3300 or more.
		if r.InputLength > cfg.MaxPromptTokens || r.turn >= 9 {
			t.Fatalf("request %d: turn %d of %d tokens, over the cap of %d", i, r.turn, r.InputLength, cfg.MaxPromptTokens)
		}
		convs[r.conv] = true
	}
	if len(convs) < 300/9 {
		t.Fatalf("%d conversations for 300 requests of at most 9 turns", len(convs))
	}
}

func TestSyntheticDefaultWorkloadHitRatio(t *testing.T) {
	t.Parallel()
	reqs, err := Synthetic(SyntheticConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s := trace.Stats(reqs)
	t.Logf("default workload: %d requests, %d blocks referenced, %d distinct ids, unbounded hit ratio %.4f (tokens %.4f), last arrival %s",
		s.Requests, s.BlocksReferenced, s.DistinctIDs, s.UnboundedHitRatio, s.UnboundedTokenHitRatio,
		reqs[len(reqs)-1].Timestamp.Round(time.Second))
	if s.UnboundedHitRatio < 0.3 || s.UnboundedHitRatio > 0.95 {
		t.Fatalf("unbounded hit ratio %v, want within [0.3, 0.95]", s.UnboundedHitRatio)
	}
}

// TestSyntheticHitRatioGrowsWithZipfS uses a large catalogue of system
// prompts of one length. An unbounded cache misses each text the first time
// only, so popularity raises its hit ratio through the rare system prompts a
// steeper law never picks; with the default 20 prompts all of them are soon
// seen and the unbounded ratio barely moves (logged below). A bounded LRU
// gains from popularity in any case: hot conversations come back sooner.
func TestSyntheticHitRatioGrowsWithZipfS(t *testing.T) {
	t.Parallel()
	ratios := func(cfg SyntheticConfig) (unbounded, lru float64) {
		reqs, err := Synthetic(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hits, total := trace.Replay(reqs, trace.NewLRU(500))
		return trace.Stats(reqs).UnboundedHitRatio, float64(hits) / float64(total)
	}
	for seed := range int64(3) {
		cfg := SyntheticConfig{Seed: seed, Requests: 1000, SystemPrompts: 1000, SystemPromptTokens: [2]int{2048, 2048}}
		cfg.ZipfS = 1.1
		u1, l1 := ratios(cfg)
		cfg.ZipfS = 2
		u2, l2 := ratios(cfg)
		t.Logf("seed %d, 1000 system prompts: ZipfS 1.1 -> 2: unbounded %.4f -> %.4f, LRU(500) %.4f -> %.4f",
			seed, u1, u2, l1, l2)
		if u2 <= u1 || l2 <= l1 {
			t.Fatalf("seed %d: hit ratios did not grow with ZipfS", seed)
		}
	}
	u1, l1 := ratios(SyntheticConfig{ZipfS: 1.1})
	u2, l2 := ratios(SyntheticConfig{ZipfS: 2})
	t.Logf("defaults: ZipfS 1.1 -> 2: unbounded %.4f -> %.4f, LRU(500) %.4f -> %.4f", u1, u2, l1, l2)
}

func TestSyntheticRejectsInvalidConfigsNamingTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field string
		cfg   SyntheticConfig
	}{
		{"ZipfS", SyntheticConfig{ZipfS: 1}},
		{"ZipfS", SyntheticConfig{ZipfS: 0.5}},
		{"ZipfS", SyntheticConfig{ZipfS: -2}},
		{"ZipfS", SyntheticConfig{ZipfS: math.NaN()}},
		{"ZipfS", SyntheticConfig{ZipfS: math.Inf(1)}},
		{"Requests", SyntheticConfig{Requests: -1}},
		{"SystemPrompts", SyntheticConfig{SystemPrompts: -3}},
		{"Conversations", SyntheticConfig{Conversations: -1}},
		{"SystemPromptTokens", SyntheticConfig{SystemPromptTokens: [2]int{-5, 100}}},
		{"SystemPromptTokens", SyntheticConfig{SystemPromptTokens: [2]int{900, 800}}},
		{"Turns", SyntheticConfig{Turns: [2]int{5, 2}}},
		{"Turns", SyntheticConfig{Turns: [2]int{0, 3}}},
		{"UserTokens", SyntheticConfig{UserTokens: [2]int{-1, 10}}},
		{"AnswerTokens", SyntheticConfig{AnswerTokens: [2]int{10, 5}}},
		{"AnswerTokens", SyntheticConfig{AnswerTokens: [2]int{1, 1 << 40}}},
		{"Rate", SyntheticConfig{Rate: -1}},
		{"Rate", SyntheticConfig{Rate: math.Inf(1)}},
		{"Rate", SyntheticConfig{Rate: 1e-300}}, // timestamps overflow
		{"MaxPromptTokens", SyntheticConfig{MaxPromptTokens: -1}},
		{"MaxPromptTokens", SyntheticConfig{MaxPromptTokens: 1000}}, // below 4096 + 512
	} {
		reqs, err := Synthetic(tc.cfg)
		if err == nil {
			t.Errorf("%+v: no error, %d requests", tc.cfg, len(reqs))
			continue
		}
		if !strings.Contains(err.Error(), tc.field) || !strings.HasPrefix(err.Error(), "cannot generate the synthetic workload: ") {
			t.Errorf("%+v: error %q does not name %s", tc.cfg, err, tc.field)
		}
	}
}

func TestSyntheticWorkloadReplaysThroughMemory(t *testing.T) {
	t.Parallel()
	cfg := smallSynthetic(5)
	cfg.Requests = 150
	reqs, err := Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// One engine and an unbounded cache reach the ideal ratios exactly.
	rep, err := ReplayMooncake(context.Background(), reqs, []Backend{NewMemory(0)},
		Config{Speedup: -1, ChunkTokens: 64, BytesPerToken: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("unbounded: chunk hit ratio %.4f, ideal %.4f", rep.ChunkHitRatio, rep.IdealChunkHitRatio)
	if rep.RequestsDone != len(reqs) || rep.ChunkHitRatio <= 0 || rep.ChunkHitRatio != rep.IdealChunkHitRatio {
		t.Fatalf("done %d of %d, chunk hit ratio %v, ideal %v", rep.RequestsDone, len(reqs), rep.ChunkHitRatio,
			rep.IdealChunkHitRatio)
	}
	if rep.Corrupt != 0 || rep.GetMisses != 0 || rep.MissingAfterAck != 0 {
		t.Fatalf("corrupt %d get misses %d missing after ack %d", rep.Corrupt, rep.GetMisses, rep.MissingAfterAck)
	}

	// Four engines on a bounded cache: losses only by eviction.
	mem := NewMemory(500)
	rep, err = ReplayMooncake(context.Background(), reqs, []Backend{mem, mem, mem, mem},
		Config{Speedup: -1, ChunkTokens: 64, BytesPerToken: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bounded, 4 engines: chunk hit ratio %.4f, %d evictions", rep.ChunkHitRatio, mem.Evictions())
	if rep.RequestsDone != len(reqs) || rep.ChunkHitRatio <= 0 || rep.Corrupt != 0 ||
		rep.MissingAfterAck > int64(mem.Evictions()) {
		t.Fatalf("done %d hit ratio %v corrupt %d missing after ack %d evictions %d", rep.RequestsDone,
			rep.ChunkHitRatio, rep.Corrupt, rep.MissingAfterAck, mem.Evictions())
	}
}
