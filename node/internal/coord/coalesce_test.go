package coord

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/node/internal/metrics"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// fakeHasPeer is a peer's Has that records the requests it is sent and
// answers from the ids and keys alone (answerFor), so a caller handed
// another's share notices. Call i (from 1) waits on blocks[i], if set,
// and fails with fails[i], if set.
type fakeHasPeer struct {
	mu       sync.Mutex
	calls    []*kvringv1.HasRequest
	blocks   map[int]chan struct{}
	fails    map[int]error
	canceled []bool // per call: its ctx had ended when it returned
}

func (f *fakeHasPeer) Has(ctx context.Context, req *kvringv1.HasRequest, _ ...grpc.CallOption) (*kvringv1.HasResponse, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	n := len(f.calls)
	block, fail := f.blocks[n], f.fails[n]
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	f.canceled = append(f.canceled, ctx.Err() != nil)
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fail != nil {
		return nil, fail
	}
	return answerFor(req), nil
}

// callSizes is the number of ids of each call, in order.
func (f *fakeHasPeer) callSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n []int
	for _, c := range f.calls {
		n = append(n, len(c.GetIds()))
	}
	return n
}

// answerFor is what the fake peer answers req: id[0] odd is held, id[0]&2
// is staging (when asked), a run's width is its key's first byte.
func answerFor(req *kvringv1.HasRequest) *kvringv1.HasResponse {
	resp := &kvringv1.HasResponse{Epoch: 9, Load: 7}
	for _, id := range req.GetIds() {
		resp.Held = append(resp.Held, id[0]&1 == 1)
		if req.GetReportStaging() {
			resp.Staging = append(resp.Staging, id[0]&2 != 0)
		}
	}
	for _, r := range req.GetGroups() {
		resp.SpreadWidth = append(resp.SpreadWidth, uint32(r.GetKey()[0]))
	}
	return resp
}

func testID(b byte) []byte {
	id := make([]byte, 32)
	id[0], id[31] = b, 0xAA
	return id
}

// hasReq asks about n ids from first, in one group keyed by key (0: no
// groups), in namespace ns.
func hasReq(ns string, first byte, n int, key byte) *kvringv1.HasRequest {
	req := &kvringv1.HasRequest{Caller: &kvringv1.PeerCaller{NodeId: "a", Epoch: 1},
		Namespace: &kvringv1.NamespaceRef{Name: ns, Fingerprint: []byte("fp")}}
	for i := range n {
		req.Ids = append(req.Ids, testID(first+byte(i)))
	}
	if key != 0 {
		req.Groups = []*kvringv1.GroupRun{{Key: testID(key), Count: uint32(n)}}
	}
	return req
}

type hasResult struct {
	resp *kvringv1.HasResponse
	err  error
}

// callHas runs co.has in a goroutine and returns where its result comes.
func callHas(ctx context.Context, co *hasCoalescer, f *fakeHasPeer, req *kvringv1.HasRequest) <-chan hasResult {
	ch := make(chan hasResult, 1)
	go func() {
		resp, err := co.has(ctx, "peer", f.Has, req)
		ch <- hasResult{resp, err}
	}()
	return ch
}

// wantOwn fails unless r is exactly the answer to req alone.
func wantOwn(t *testing.T, name string, r hasResult, req *kvringv1.HasRequest) {
	t.Helper()
	want := answerFor(req)
	switch {
	case r.err != nil:
		t.Errorf("%s: %v", name, r.err)
	case !slices.Equal(r.resp.GetHeld(), want.GetHeld()) || !slices.Equal(r.resp.GetStaging(), want.GetStaging()) ||
		!slices.Equal(r.resp.GetSpreadWidth(), want.GetSpreadWidth()) || r.resp.GetLoad() != 7 || r.resp.GetEpoch() != 9:
		t.Errorf("%s: got held %v staging %v widths %v load %d epoch %d, want held %v staging %v widths %v load 7 epoch 9", name,
			r.resp.GetHeld(), r.resp.GetStaging(), r.resp.GetSpreadWidth(), r.resp.GetLoad(), r.resp.GetEpoch(),
			want.GetHeld(), want.GetStaging(), want.GetSpreadWidth())
	}
}

type countAdder struct{ n float64 }

func (c *countAdder) Add(v float64) { c.n += v }

// TestHasCoalescerMergesWhileBusy: requests that arrive while a call to the
// peer is in flight go as one call when it returns, and each caller gets
// exactly its own held, staging and spread widths.
func TestHasCoalescerMergesWhileBusy(t *testing.T) {
	for _, staging := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			release := make(chan struct{})
			f := &fakeHasPeer{blocks: map[int]chan struct{}{1: release}}
			merged := &countAdder{}
			co := newHasCoalescer(100, time.Second, merged)
			ctx := t.Context()
			first := callHas(ctx, co, f, hasReq("ns", 1, 2, 200))
			synctest.Wait() // the first call is in flight
			reqs := []*kvringv1.HasRequest{hasReq("ns", 10, 3, 210), hasReq("ns", 20, 1, 220), hasReq("ns", 30, 4, 230)}
			var waits []<-chan hasResult
			for _, r := range reqs {
				r.ReportStaging = staging
				waits = append(waits, callHas(ctx, co, f, r))
			}
			synctest.Wait()
			if got := f.callSizes(); !slices.Equal(got, []int{2}) {
				t.Fatalf("calls while the first is in flight: %v, want [2]", got)
			}
			close(release)
			wantOwn(t, "first", <-first, hasReq("ns", 1, 2, 200))
			for i, w := range waits {
				wantOwn(t, reqs[i].String(), <-w, reqs[i])
			}
			if got := f.callSizes(); !slices.Equal(got, []int{2, 8}) {
				t.Errorf("calls: %v, want [2 8] (the three queued requests in one call)", got)
			}
			if merged.n != 3 {
				t.Errorf("merged counter %v, want 3", merged.n)
			}
			if len(co.lanes) != 0 {
				t.Errorf("%d lanes left after the calls", len(co.lanes))
			}
		})
	}
}

// TestHasCoalescerIdleSendsAtOnce: a request to an idle peer is sent by
// its caller, at once, alone.
func TestHasCoalescerIdleSendsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeHasPeer{}
		co := newHasCoalescer(100, time.Second, nil)
		start := time.Now()
		req := hasReq("ns", 1, 3, 200)
		resp, err := co.has(t.Context(), "peer", f.Has, req)
		wantOwn(t, "idle", hasResult{resp, err}, req)
		if d := time.Since(start); d != 0 {
			t.Errorf("an idle call waited %v", d)
		}
		if got := f.callSizes(); !slices.Equal(got, []int{3}) {
			t.Errorf("calls %v, want [3]", got)
		}
	})
}

// TestHasCoalescerKeepsApart: pinned requests go alone at once; a request
// of another namespace or of other report_staging is not merged; two
// requests that end and begin with the same group are not put side by side.
func TestHasCoalescerKeepsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		f := &fakeHasPeer{blocks: map[int]chan struct{}{1: release}}
		co := newHasCoalescer(100, time.Second, nil)
		ctx := t.Context()
		first := callHas(ctx, co, f, hasReq("ns", 1, 1, 200))
		synctest.Wait()
		pinned := hasReq("ns", 5, 2, 205)
		pinned.Pin = &kvringv1.LeasePin{LeaseId: 1, TtlMs: 1000}
		if r := <-callHas(ctx, co, f, pinned); r.err != nil {
			t.Fatal(r.err)
		}
		other := hasReq("other", 10, 3, 210)
		staging := hasReq("ns", 20, 4, 220)
		staging.ReportStaging = true
		g1, h, g2, g3 := hasReq("ns", 30, 5, 230), hasReq("ns", 40, 6, 240), hasReq("ns", 50, 7, 230), hasReq("ns", 60, 8, 230)
		reqs := []*kvringv1.HasRequest{other, staging, g1, h, g2, g3}
		var waits []<-chan hasResult
		for _, r := range reqs {
			waits = append(waits, callHas(ctx, co, f, r))
			synctest.Wait() // queued in this order
		}
		close(release)
		<-first
		for i, w := range waits {
			wantOwn(t, reqs[i].String(), <-w, reqs[i])
		}
		// 1: first; 2: pinned, at once; 3: other (the next batch holds only
		// it); 4: staging; 5: g1 h g2 as one call (230 240 230), g3 alone
		// (230 next to 230 would count one lookup of the group).
		got := f.callSizes()
		slices.Sort(got[4:])
		if want := []int{1, 2, 3, 4, 8, 18}; !slices.Equal(got, want) {
			t.Errorf("call sizes %v, want %v", got, want)
		}
	})
}

// TestHasCoalescerFailsEach: a failed merged call fails each of its callers
// with its error.
func TestHasCoalescerFailsEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		boom := errors.New("boom")
		f := &fakeHasPeer{blocks: map[int]chan struct{}{1: release}, fails: map[int]error{2: boom}}
		co := newHasCoalescer(100, time.Second, nil)
		ctx := t.Context()
		first := callHas(ctx, co, f, hasReq("ns", 1, 1, 200))
		synctest.Wait()
		a, b := callHas(ctx, co, f, hasReq("ns", 10, 2, 210)), callHas(ctx, co, f, hasReq("ns", 20, 2, 220))
		synctest.Wait()
		close(release)
		<-first
		for _, w := range []<-chan hasResult{a, b} {
			if r := <-w; !errors.Is(r.err, boom) {
				t.Errorf("got %v, want %v", r.err, boom)
			}
		}
		if got := f.callSizes(); !slices.Equal(got, []int{1, 4}) {
			t.Errorf("calls %v, want [1 4]", got)
		}
	})
}

// TestHasCoalescerCancelWaiting: a caller whose ctx ends while queued
// leaves with its ctx's error; the others are sent without it.
func TestHasCoalescerCancelWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		f := &fakeHasPeer{blocks: map[int]chan struct{}{1: release}}
		co := newHasCoalescer(100, time.Second, nil)
		ctx := t.Context()
		first := callHas(ctx, co, f, hasReq("ns", 1, 1, 200))
		synctest.Wait()
		gone, cancel := context.WithCancel(ctx)
		ra, rb, rc := hasReq("ns", 10, 2, 210), hasReq("ns", 20, 3, 220), hasReq("ns", 30, 4, 230)
		a, b, c := callHas(ctx, co, f, ra), callHas(gone, co, f, rb), callHas(ctx, co, f, rc)
		synctest.Wait()
		cancel()
		if r := <-b; !errors.Is(r.err, context.Canceled) {
			t.Errorf("canceled caller: %v, want %v", r.err, context.Canceled)
		}
		close(release)
		<-first
		wantOwn(t, "a", <-a, ra)
		wantOwn(t, "c", <-c, rc)
		if got := f.callSizes(); !slices.Equal(got, []int{1, 6}) {
			t.Errorf("calls %v, want [1 6]", got)
		}
	})
}

// TestHasCoalescerCancelDuringCall: a caller whose ctx ends during the
// merged call gets its ctx's error at once, and the call goes on for the
// others, not canceled.
func TestHasCoalescerCancelDuringCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release, release2 := make(chan struct{}), make(chan struct{})
		f := &fakeHasPeer{blocks: map[int]chan struct{}{1: release, 2: release2}}
		co := newHasCoalescer(100, time.Minute, nil)
		ctx := t.Context()
		first := callHas(ctx, co, f, hasReq("ns", 1, 1, 200))
		synctest.Wait()
		// The caller whose ctx ends last leads: the other one gives up.
		long, cancelLong := context.WithTimeout(ctx, 10*time.Second)
		defer cancelLong()
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ra, rb := hasReq("ns", 10, 2, 210), hasReq("ns", 20, 3, 220)
		a, b := callHas(long, co, f, ra), callHas(short, co, f, rb)
		synctest.Wait()
		close(release)
		<-first
		synctest.Wait() // the merged call is in flight
		cancel()
		if r := <-b; !errors.Is(r.err, context.Canceled) {
			t.Errorf("caller that gave up: %v, want %v", r.err, context.Canceled)
		}
		close(release2)
		wantOwn(t, "a", <-a, ra)
		f.mu.Lock()
		defer f.mu.Unlock()
		if !slices.Equal(f.canceled, []bool{false, false}) || len(f.calls) != 2 || len(f.calls[1].GetIds()) != 5 {
			t.Errorf("calls %d (last %d ids), canceled %v; want 2 calls, the last of 5 ids, not canceled", len(f.calls), len(f.calls[len(f.calls)-1].GetIds()), f.canceled)
		}
	})
}

// TestHasCoalescerBatchLimit: a merged call carries at most maxBatch ids;
// the rest wait for the next call.
func TestHasCoalescerBatchLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		f := &fakeHasPeer{blocks: map[int]chan struct{}{1: release}}
		co := newHasCoalescer(6, time.Second, nil)
		ctx := t.Context()
		first := callHas(ctx, co, f, hasReq("ns", 1, 1, 200))
		synctest.Wait()
		var waits []<-chan hasResult
		var reqs []*kvringv1.HasRequest
		for k := range 4 {
			r := hasReq("ns", byte(10*(k+1)), 3, byte(210+k))
			reqs = append(reqs, r)
			waits = append(waits, callHas(ctx, co, f, r))
		}
		synctest.Wait()
		close(release)
		<-first
		for i, w := range waits {
			wantOwn(t, reqs[i].String(), <-w, reqs[i])
		}
		if got := f.callSizes(); !slices.Equal(got, []int{1, 6, 6}) {
			t.Errorf("calls %v, want [1 6 6]", got)
		}
	})
}

// TestHasCoalescerLeaderGivesUp: the caller that sends a merged call for
// the others gets its ctx's error when its ctx ends during the call, and
// the others their answers.
func TestHasCoalescerLeaderGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release, release2 := make(chan struct{}), make(chan struct{})
		f := &fakeHasPeer{blocks: map[int]chan struct{}{1: release, 2: release2}}
		co := newHasCoalescer(100, time.Second, nil)
		ctx := t.Context()
		first := callHas(ctx, co, f, hasReq("ns", 1, 1, 200))
		synctest.Wait()
		lctx, cancel := context.WithCancel(ctx) // no deadline of its own: it ends last, and leads
		ra, rb := hasReq("ns", 10, 2, 210), hasReq("ns", 20, 3, 220)
		short, cancelShort := context.WithTimeout(ctx, 900*time.Millisecond)
		defer cancelShort()
		a, b := callHas(lctx, co, f, ra), callHas(short, co, f, rb)
		synctest.Wait()
		close(release)
		<-first
		synctest.Wait() // the merged call is in flight
		cancel()
		close(release2)
		if r := <-a; !errors.Is(r.err, context.Canceled) {
			t.Errorf("leader that gave up: %v, want %v", r.err, context.Canceled)
		}
		wantOwn(t, "b", <-b, rb)
		if got := f.callSizes(); !slices.Equal(got, []int{1, 5}) {
			t.Errorf("calls %v, want [1 5]", got)
		}
	})
}

// TestHasCoalescerQueueCountsToTimeout: a request queued behind a call to a
// stuck peer fails PeerTimeout after it came, not after the call in flight
// ends and its own call times out too (2 timeouts).
func TestHasCoalescerQueueCountsToTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeHasPeer{blocks: map[int]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}}
		co := newHasCoalescer(100, time.Second, nil)
		ctx := t.Context()
		start := time.Now()
		first := callHas(ctx, co, f, hasReq("ns", 1, 1, 200))
		synctest.Wait()
		r := <-callHas(ctx, co, f, hasReq("ns", 10, 2, 210))
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("queued behind a stuck peer: %v, want %v", r.err, context.DeadlineExceeded)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("queued request ended %v after it came, want 1s (one timeout)", d)
		}
		<-first
	})
}

// TestCoalescingIsOffUnlessConfigured: Config.CoalesceHas decides whether
// the coordinator's Has requests may share calls; by default each goes
// alone.
func TestCoalescingIsOffUnlessConfigured(t *testing.T) {
	if c := New(Config{Metrics: metrics.New()}); !c.has.off {
		t.Fatal("a coordinator without CoalesceHas merges Has requests")
	}
	if c := New(Config{Metrics: metrics.New(), CoalesceHas: true}); c.has.off {
		t.Fatal("a coordinator with CoalesceHas sends every Has request alone")
	}
}
