package loadtest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvring/kvring/loadtest/trace"
)

// tinyTrace is hand-written: request 1 shares two blocks with request 0,
// request 2 repeats request 0 and request 3 shares nothing.
func tinyTrace() []trace.Request {
	return []trace.Request{
		{Timestamp: 0, InputLength: 3 * 512, HashIDs: []int64{1, 2, 3}},
		{Timestamp: 10 * time.Millisecond, InputLength: 2*512 + 100, HashIDs: []int64{1, 2, 4}},
		{Timestamp: 20 * time.Millisecond, InputLength: 3 * 512, HashIDs: []int64{1, 2, 3}},
		{Timestamp: 30 * time.Millisecond, InputLength: 512, HashIDs: []int64{9}},
	}
}

func TestReplayOfATinyTraceHitsTheSharedPrefixes(t *testing.T) {
	mem := NewMemory(0)
	rep, err := ReplayMooncake(context.Background(), tinyTrace(), []Backend{mem}, Config{Speedup: 10})
	if err != nil {
		t.Fatal(err)
	}
	// Chunks: 96, 64+7, 96, 32 = 295; hits: 0, 64, 96, 0 = 160.
	if rep.RequestsDone != 4 || rep.Chunks != 295 || rep.ChunkHits != 160 {
		t.Fatalf("done %d chunks %d hits %d, want 4, 295, 160", rep.RequestsDone, rep.Chunks, rep.ChunkHits)
	}
	if rep.ChunkHitRatio != rep.IdealChunkHitRatio || rep.TokenHitRatio != rep.IdealTokenHitRatio {
		t.Fatalf("an unbounded cache got %v/%v, ideal %v/%v", rep.ChunkHitRatio, rep.TokenHitRatio,
			rep.IdealChunkHitRatio, rep.IdealTokenHitRatio)
	}
	if rep.Stored != 135 || rep.AlreadyHeld != 0 || rep.Put.Bytes != (135*16-12)*64 || rep.Get.Chunks != 160 {
		t.Fatalf("stored %d already held %d put bytes %d got %d", rep.Stored, rep.AlreadyHeld, rep.Put.Bytes, rep.Get.Chunks)
	}
	if rep.Corrupt != 0 || rep.MissingAfterAck != 0 || rep.GetMisses != 0 {
		t.Fatalf("corrupt %d missing %d get misses %d", rep.Corrupt, rep.MissingAfterAck, rep.GetMisses)
	}
	// 30 ms of trace at 10x takes at least 3 ms.
	if rep.Elapsed < 3*time.Millisecond {
		t.Fatalf("elapsed %s: arrivals were not paced", rep.Elapsed)
	}
}

func TestBlockLevelReplayMatchesTraceLRU(t *testing.T) {
	reqs, err := trace.ReadFile("trace/testdata/synthetic_trace.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	reqs = reqs[:1500]
	sum := trace.Stats(reqs)
	capacity := sum.DistinctIDs / 10
	mem := NewMemory(capacity)
	rep, err := ReplayMooncake(context.Background(), reqs, []Backend{mem},
		Config{ChunkTokens: trace.BlockTokens, BytesPerToken: 1, Speedup: -1})
	if err != nil {
		t.Fatal(err)
	}
	lruHits, total := trace.Replay(reqs, trace.NewLRU(capacity))
	if rep.Chunks != int64(total) {
		t.Fatalf("%d chunks, trace has %d blocks", rep.Chunks, total)
	}
	// One chunk per block: the prefix hits plus the held blocks after a
	// missing one are exactly LRU's per-block hits.
	if got := rep.ChunkHits + rep.AlreadyHeld; got != int64(lruHits) {
		t.Fatalf("prefix hits %d + already held %d = %d, trace.LRU hits %d", rep.ChunkHits, rep.AlreadyHeld, got, lruHits)
	}
	if rep.IdealBlockHitRatio != sum.UnboundedHitRatio || rep.IdealChunkHitRatio != sum.UnboundedHitRatio ||
		rep.IdealTokenHitRatio != sum.UnboundedTokenHitRatio {
		t.Fatalf("ideal ratios %v/%v/%v, trace.Stats %v/%v", rep.IdealBlockHitRatio, rep.IdealChunkHitRatio,
			rep.IdealTokenHitRatio, sum.UnboundedHitRatio, sum.UnboundedTokenHitRatio)
	}
	if rep.Corrupt != 0 || rep.GetMisses != 0 || rep.MissingAfterAck > int64(mem.Evictions()) {
		t.Fatalf("corrupt %d get misses %d missing %d evictions %d", rep.Corrupt, rep.GetMisses, rep.MissingAfterAck, mem.Evictions())
	}
}

func TestConcurrentEnginesLoseNothingUnexplained(t *testing.T) {
	reqs, err := trace.ReadFile("trace/testdata/synthetic_trace.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	reqs = reqs[:150]
	mem := NewMemory(20000)
	engines := []Backend{mem, mem, mem, mem}
	var progress atomic.Int64
	rep, err := ReplayMooncake(context.Background(), reqs, engines, Config{Speedup: -1, BatchChunks: 100, LookupBatch: 1000,
		ProgressInterval: time.Millisecond, OnProgress: func(Progress) { progress.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RequestsDone != len(reqs) || rep.Corrupt != 0 || rep.Lookup.Calls < int64(len(reqs)) {
		t.Fatalf("done %d corrupt %d lookups %d", rep.RequestsDone, rep.Corrupt, rep.Lookup.Calls)
	}
	if rep.MissingAfterAck > int64(mem.Evictions()) || mem.Evictions() == 0 {
		t.Fatalf("missing after ack %d, evictions %d", rep.MissingAfterAck, mem.Evictions())
	}
	if rep.ChunkHitRatio <= 0 || rep.ChunkHitRatio > rep.IdealChunkHitRatio {
		t.Fatalf("hit ratio %v, ideal %v", rep.ChunkHitRatio, rep.IdealChunkHitRatio)
	}
	if rep.Put.P99Ms < rep.Put.P50Ms || rep.Put.GBPerSec <= 0 {
		t.Fatalf("put stats %+v", rep.Put)
	}
}

// faulty corrupts every read of one chunk and forgets every chunk put once.
type faulty struct {
	*Memory
	corrupt ChunkID
	forget  bool
}

func (f *faulty) Get(ctx context.Context, ids []ChunkID) ([]GetOutcome, error) {
	out, err := f.Memory.Get(ctx, ids)
	for i, id := range ids {
		if id == f.corrupt && out[i].Found {
			out[i].Data[0] ^= 0xff
		}
	}
	return out, err
}

func (f *faulty) Put(ctx context.Context, chunks []Chunk) ([]PutOutcome, error) {
	out, err := f.Memory.Put(ctx, chunks)
	if f.forget {
		f.Memory = NewMemory(0)
		f.forget = false
	}
	return out, err
}

func TestReplayCountsCorruptReadsAndUnexplainedLosses(t *testing.T) {
	reqs := tinyTrace()
	f := &faulty{Memory: NewMemory(0), corrupt: BlockChunkIDs(2, 1)[0], forget: true}
	rep, err := ReplayMooncake(context.Background(), reqs, []Backend{f}, Config{Speedup: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Request 0's chunks are forgotten after their put: request 1 misses
	// chunk 0 of block 1, and request 2 chunk 0 of block 3 (request 1 put
	// blocks 1 and 2 again). Request 2 reads block 2's first chunk corrupt.
	if rep.MissingAfterAck != 2 || rep.Corrupt != 1 {
		t.Fatalf("missing after ack %d corrupt %d, want 2 and 1", rep.MissingAfterAck, rep.Corrupt)
	}
	if rep.ChunkHits != 32 { // request 2 uses block 1 only
		t.Fatalf("hits %d, want 32", rep.ChunkHits)
	}
}

func TestReplayStopsAtTheDurationCap(t *testing.T) {
	reqs := tinyTrace()
	reqs[3].Timestamp = time.Hour
	rep, err := ReplayMooncake(context.Background(), reqs, []Backend{NewMemory(0)},
		Config{Speedup: 1, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.StoppedEarly || rep.RequestsDone != 3 || rep.RequestsPlanned != 4 {
		t.Fatalf("stopped %v done %d of %d", rep.StoppedEarly, rep.RequestsDone, rep.RequestsPlanned)
	}
}
