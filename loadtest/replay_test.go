package loadtest

import (
	"context"
	"errors"
	"strings"
	"sync"
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

func (f *faulty) Get(ctx context.Context, ids, groups []ChunkID) ([]GetOutcome, error) {
	out, err := f.Memory.Get(ctx, ids, groups)
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
	if rep.MissingFoundLater != 0 { // truly forgotten: not found after the run
		t.Fatalf("missing found later %d, want 0", rep.MissingFoundLater)
	}
	if rep.ChunkHits != 32 { // request 2 uses block 1 only
		t.Fatalf("hits %d, want 32", rep.ChunkHits)
	}
}

// hiding reports one chunk not held during a stretch of lookups (its node
// was down) and held again afterwards.
type hiding struct {
	*Memory
	hide    ChunkID
	lookups int
	failPut bool // fail the hidden chunk's put while it is hidden
}

func (h *hiding) Lookup(ctx context.Context, ids, groups []ChunkID) (int, error) {
	h.lookups++
	n, err := h.Memory.Lookup(ctx, ids, groups)
	if h.lookups == 2 { // request 1 only
		for i := range n {
			if ids[i] == h.hide {
				return i, err
			}
		}
	}
	return n, err
}

// Put fails the hidden chunk while it is hidden, as a down node would.
func (h *hiding) Put(ctx context.Context, chunks []Chunk) ([]PutOutcome, error) {
	out, err := h.Memory.Put(ctx, chunks)
	for i, c := range chunks {
		if h.failPut && h.lookups == 2 && c.ID == h.hide {
			out[i] = Failed
		}
	}
	return out, err
}

// TestReplayTellsUnreachableFromLostChunks: a chunk that was missing for a
// while and held again after the run, without being stored again, is
// reported as found again, not lost.
func TestReplayTellsUnreachableFromLostChunks(t *testing.T) {
	// failPut: found by the lookup after the run; else: the engine's put of
	// the "missing" chunk is answered already held.
	for _, failPut := range []bool{true, false} {
		reqs := tinyTrace()
		h := &hiding{Memory: NewMemory(0), hide: BlockChunkIDs(1, 1)[0], failPut: failPut}
		rep, err := ReplayMooncake(context.Background(), reqs[:2], []Backend{h}, Config{Speedup: -1})
		if err != nil {
			t.Fatal(err)
		}
		if rep.MissingAfterAck != 1 || rep.MissingFoundLater != 1 || len(rep.MissingSample) != 0 {
			t.Fatalf("failPut %v: missing after ack %d, found later %d, sample %v; want 1, 1, none", failPut,
				rep.MissingAfterAck, rep.MissingFoundLater, rep.MissingSample)
		}
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

// outage fails every call from the startAt-th lookup on, for at least
// lasting and at least minFails calls, and notes when it failed the first
// and the last call.
type outage struct {
	*Memory
	startAt  int
	lasting  time.Duration
	minFails int

	mu                  sync.Mutex
	lookups, fails      int
	over                bool
	firstFail, lastFail time.Time
}

var errOutage = errors.New("backend down")

func (o *outage) fail(lookup bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if lookup {
		o.lookups++
	}
	now := time.Now()
	if o.over || o.lookups < o.startAt {
		return nil
	}
	if o.fails >= o.minFails && now.Sub(o.firstFail) >= o.lasting {
		o.over = true
		return nil
	}
	if o.fails == 0 {
		o.firstFail = now
	}
	o.fails++
	o.lastFail = now
	return errOutage
}

func (o *outage) Lookup(ctx context.Context, ids, groups []ChunkID) (int, error) {
	if err := o.fail(true); err != nil {
		return 0, err
	}
	return o.Memory.Lookup(ctx, ids, groups)
}

func (o *outage) Get(ctx context.Context, ids, groups []ChunkID) ([]GetOutcome, error) {
	if err := o.fail(false); err != nil {
		return nil, err
	}
	return o.Memory.Get(ctx, ids, groups)
}

func (o *outage) Put(ctx context.Context, chunks []Chunk) ([]PutOutcome, error) {
	if err := o.fail(false); err != nil {
		return nil, err
	}
	return o.Memory.Put(ctx, chunks)
}

func TestTimelineShowsFailuresOnlyWhileTheBackendFails(t *testing.T) {
	t.Parallel()
	// 100 requests 3 ms apart, each sharing its first block with others.
	var reqs []trace.Request
	for i := range 100 {
		reqs = append(reqs, trace.Request{Timestamp: time.Duration(i) * 3 * time.Millisecond, InputLength: 2 * 512,
			HashIDs: []int64{int64(i % 7), int64(100 + i)}})
	}
	const interval = 20 * time.Millisecond
	// The outage starts with request 20's lookup, about 60 ms in, and
	// lasts 60 ms: the 80 requests after it keep the backend busy.
	b := &outage{Memory: NewMemory(0), startAt: 20, lasting: 60 * time.Millisecond, minFails: 5}
	var last Progress
	rep, err := ReplayMooncake(context.Background(), reqs, []Backend{b, b}, Config{Speedup: 1,
		TimelineInterval: interval, ProgressInterval: time.Hour, OnProgress: func(p Progress) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	errorsTotal := rep.Lookup.Errors + rep.Get.Errors + rep.Put.Errors
	if rep.RequestsDone != len(reqs) || errorsTotal == 0 || rep.Failed == 0 {
		t.Fatalf("done %d of %d, %d errors, %d failed chunks: the run stopped or the outage missed it",
			rep.RequestsDone, len(reqs), errorsTotal, rep.Failed)
	}
	// A failed lookup reports nothing missing.
	if rep.MissingAfterAck != 0 || rep.Corrupt != 0 {
		t.Fatalf("missing after ack %d, corrupt %d", rep.MissingAfterAck, rep.Corrupt)
	}
	if last.Done != rep.RequestsDone || last.Errors != errorsTotal || last.FailedChunks != rep.Failed {
		t.Fatalf("last progress %+v; report: done %d, %d errors, %d failed chunks", last, rep.RequestsDone, errorsTotal, rep.Failed)
	}

	// The replay counts a failure when the call has returned: at or after
	// the backend failed it, a moment later. Allow that moment one interval.
	lo, lastFail := b.firstFail.Sub(rep.StartedAt).Seconds(), b.lastFail.Sub(rep.StartedAt).Seconds()
	hi := lastFail + interval.Seconds()
	var sum TimelinePoint
	failing, afterWithRequests := 0, 0
	for i, p := range rep.Timeline {
		if want := (time.Duration(i) * interval).Seconds(); p.T != want {
			t.Fatalf("point %d starts at %vs, want %vs", i, p.T, want)
		}
		inWindow := p.T+p.Len > lo && p.T <= hi
		if (p.Errors > 0 || p.Failed > 0) && !inWindow {
			t.Errorf("point at %vs has %d errors and %d failed chunks, outside the outage [%.3fs, %.3fs]", p.T, p.Errors,
				p.Failed, lo, hi)
		}
		if p.Errors > 0 {
			failing++
		}
		if p.T > lastFail && p.Requests > 0 {
			afterWithRequests++
		}
		sum.Requests += p.Requests
		sum.Chunks += p.Chunks
		sum.ChunkHits += p.ChunkHits
		sum.PutBytes += p.PutBytes
		sum.GetBytes += p.GetBytes
		sum.Errors += p.Errors
		sum.Failed += p.Failed
		sum.Rejected += p.Rejected
	}
	if failing == 0 || afterWithRequests == 0 {
		t.Fatalf("%d points with errors, %d with requests after the outage:\n%+v", failing, afterWithRequests, rep.Timeline)
	}
	end := rep.Timeline[len(rep.Timeline)-1]
	if got := time.Duration((end.T + end.Len) * 1e9); got-rep.Elapsed > time.Microsecond || rep.Elapsed-got > time.Microsecond {
		t.Fatalf("the timeline ends at %s, the run at %s", got, rep.Elapsed)
	}
	// Every acknowledged put is fully acknowledged by Memory, so acked bytes
	// are the put bytes of the successful calls.
	want := TimelinePoint{Requests: int64(rep.RequestsDone), Chunks: rep.Chunks, ChunkHits: rep.ChunkHits,
		PutBytes: rep.Put.Bytes, GetBytes: rep.Get.Bytes, Errors: errorsTotal, Failed: rep.Failed, Rejected: rep.Rejected}
	if sum != want {
		t.Fatalf("timeline sums %+v\nreport totals %+v", sum, want)
	}
}

// refusing rejects every put chunk and says why.
type refusing struct{ *Memory }

func (r *refusing) Put(_ context.Context, chunks []Chunk) ([]PutOutcome, error) {
	out := make([]PutOutcome, len(chunks))
	for i := range out {
		out[i] = Rejected
	}
	return out, nil
}

func (r *refusing) ChunkFailure() string { return "rejected: no space left" }

// TestTheReportSaysWhyTheFirstChunkWasNotHeld: a backend that gives the
// reason for a chunk it did not hold has the first one in the report.
func TestTheReportSaysWhyTheFirstChunkWasNotHeld(t *testing.T) {
	rep, err := ReplayMooncake(context.Background(), tinyTrace(), []Backend{&refusing{NewMemory(0)}}, Config{Speedup: -1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rejected == 0 || rep.FirstChunkFailure != "rejected: no space left" {
		t.Fatalf("rejected %d, first chunk failure %q", rep.Rejected, rep.FirstChunkFailure)
	}
	var out strings.Builder
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "first chunk not held: rejected: no space left") {
		t.Fatalf("the table does not say why:\n%s", out.String())
	}
}
