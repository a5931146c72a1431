package loadtest

import (
	"io"
	"log/slog"
	"testing"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/loadtest/trace"
	"github.com/kvring/kvring/store"
)

// The noisy-neighbour figure for namespace shares, in process: namespace
// "steady" replays the Mooncake trace through a real store (a block is a
// hit when Get finds it; a miss is put), while namespace "burst" bursts to
// ten times its share: between two accesses of steady it reads one chunk
// of a working set ten times its share of the budget, in a loop, and puts
// it when it misses (a loop larger than what it holds misses every time,
// so it writes as fast as steady reads). shareChunkSize keeps the store
// small and the run short.
const shareChunkSize = 4 << 10

// shareSetup is one noisy-neighbour run's settings.
type shareSetup struct {
	capacity int  // the store's budget, in chunks
	shares   bool // steady and burst get their shares; else no shares (one LRU)
	burst    bool // burst writes; else steady runs alone
}

// steadyGuarantee and burstShare are the shares of the run, in percent of
// the budget: steady is guaranteed most of the node, burst is capped at the
// rest (and bursts to ten times that).
const (
	steadyGuarantee = 95
	burstShare      = 5
)

// replayBeside runs one setup and returns steady's hit ratio.
func replayBeside(tb testing.TB, reqs []trace.Request, su shareSetup) float64 {
	s, err := store.Open(store.Config{
		DataDir: tb.TempDir(), ShmDir: testutil.ShmDir(tb, "shares-"),
		MemoryLimit: int64(su.capacity) * shareChunkSize, ExpectedChunkSize: shareChunkSize,
		Policy: store.PolicyLRU, MaintenanceInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	if su.shares {
		for ns, sh := range map[string]store.Share{
			"steady": {Guarantee: store.Amount{Percent: steadyGuarantee}},
			"burst":  {Cap: store.Amount{Percent: burstShare}},
		} {
			if err := s.SetShare(ns, sh); err != nil {
				tb.Fatal(err)
			}
		}
	}
	data := make([]byte, shareChunkSize)
	crc := store.Checksum(data)
	steady := &storePolicy{s: s, data: data, crc: crc, ns: "steady"}
	var p trace.Policy = steady
	if su.burst {
		p = &burstBeside{steady: steady, burst: &storePolicy{s: s, data: data, crc: crc, ns: "burst"},
			loop: int64(10 * su.capacity * burstShare / 100)}
	}
	hits, total := trace.Replay(reqs, p)
	return float64(hits) / float64(total)
}

// burstBeside is steady's policy with one access of burst's before each of
// its own.
type burstBeside struct {
	steady, burst *storePolicy
	loop          int64 // burst's working set, in chunks
	next          int64
}

func (b *burstBeside) Access(n int64) bool {
	b.burst.Access(b.next % b.loop)
	b.next++
	return b.steady.Access(n)
}

// shareTrace is the replay of the share test and benchmark: the first
// requests of the trace (the whole of it with $KVRING_TRACE set), and a
// budget of 10 % of its distinct blocks.
func shareTrace(tb testing.TB, requests int) ([]trace.Request, int) {
	reqs, err := trace.ReadFile(tracePath(tb))
	if err != nil {
		tb.Fatal(err)
	}
	if requests > 0 && len(reqs) > requests {
		reqs = reqs[:requests]
	}
	return reqs, trace.Stats(reqs).DistinctIDs / 10
}

// TestASteadyNamespaceKeepsItsHitRatioBesideABurst: with shares, the
// steady namespace's hit ratio while another bursts to ten times its share
// stays within 10 % of its run alone; without shares the same burst costs
// it more than that (the test's control: the burst is a real threat).
func TestASteadyNamespaceKeepsItsHitRatioBesideABurst(t *testing.T) {
	t.Parallel()
	requests := 4000
	if testing.Short() {
		requests = 1500
	}
	reqs, capacity := shareTrace(t, requests)
	alone := replayBeside(t, reqs, shareSetup{capacity: capacity, shares: true})
	shared := replayBeside(t, reqs, shareSetup{capacity: capacity, shares: true, burst: true})
	unshared := replayBeside(t, reqs, shareSetup{capacity: capacity, burst: true})
	t.Logf("steady hit ratio at %d chunks: alone %.4f, beside the burst with shares %.4f (%.3fx), without shares %.4f (%.3fx)",
		capacity, alone, shared, shared/alone, unshared, unshared/alone)
	if shared < 0.9*alone {
		t.Errorf("with shares the steady namespace's hit ratio fell from %.4f alone to %.4f beside the burst: more than 10 %%", alone, shared)
	}
	if unshared >= 0.9*alone {
		t.Errorf("without shares the burst cost the steady namespace less than 10 %% (%.4f alone, %.4f beside it): the test proves nothing", alone, unshared)
	}
}

// BenchmarkNamespaceShares reports the steady namespace's hit ratio alone,
// beside a burst to ten times the other namespace's share with shares on,
// and beside it without shares, and the two ratios to alone.
func BenchmarkNamespaceShares(b *testing.B) {
	reqs, capacity := shareTrace(b, 0)
	var alone, shared, unshared float64
	for i := 0; i < b.N; i++ {
		alone = replayBeside(b, reqs, shareSetup{capacity: capacity, shares: true})
		shared = replayBeside(b, reqs, shareSetup{capacity: capacity, shares: true, burst: true})
		unshared = replayBeside(b, reqs, shareSetup{capacity: capacity, burst: true})
	}
	b.ReportMetric(alone, "alone-hit")
	b.ReportMetric(shared, "shares-hit")
	b.ReportMetric(unshared, "noshares-hit")
	b.ReportMetric(shared/alone, "shares-ratio")
	b.ReportMetric(unshared/alone, "noshares-ratio")
	b.Logf("%d requests, budget %d chunks of %d bytes", len(reqs), capacity, shareChunkSize)
}
