package coord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() time.Time               { return time.Unix(0, c.t.Load()) }
func (c *fakeClock) advance(d time.Duration)      { c.t.Add(int64(d)) }
func newFakeClock() *fakeClock                    { c := &fakeClock{}; c.t.Store(time.Unix(1000, 0).UnixNano()); return c }
func countInc(n *atomic.Int64) interface{ Inc() } { return incFunc(func() { n.Add(1) }) }

type incFunc func()

func (f incFunc) Inc() { f() }

// TestAPeerOutageIsLoggedWhenItStartsAndEnds: a run of failures is one WARN
// when it starts and one INFO with the count and duration when the peer
// answers again; failures in between are only counted; another peer's state
// is its own; a second outage is logged again.
func TestAPeerOutageIsLoggedWhenItStartsAndEnds(t *testing.T) {
	t.Parallel()
	logs := &testutil.Logs{}
	clock := newFakeClock()
	var total atomic.Int64
	pf := newPeerFailures(logs.Logger(), clock.now, countInc(&total))
	a := ring.Member{ID: "node-a", Addr: "127.0.0.1:1"}
	b := ring.Member{ID: "node-b", Addr: "127.0.0.1:2"}
	down := status.Error(codes.Unavailable, "connection refused")

	pf.ok(a) // healthy: nothing to say
	for range 5 {
		pf.failed(a, down)
		clock.advance(300 * time.Millisecond)
	}
	pf.ok(b)
	if n := len(logs.Lines(`msg="peer unreachable"`, "peer=node-a", "connection refused")); n != 1 {
		t.Fatalf("%d 'peer unreachable' lines for 5 failures, want 1:\n%s", n, logs.Lines(""))
	}
	if pf.unreachable() != 1 || total.Load() != 5 {
		t.Fatalf("unreachable=%d failures=%d, want 1 and 5", pf.unreachable(), total.Load())
	}
	pf.ok(a)
	pf.ok(a)
	back := logs.Lines(`msg="peer reachable again"`)
	if len(back) != 1 || !strings.Contains(back[0], "peer=node-a") || !strings.Contains(back[0], "failures=5") ||
		!strings.Contains(back[0], "duration=1.5s") || !strings.Contains(back[0], "level=INFO") {
		t.Fatalf("recovery lines: %q, want one INFO with failures=5 duration=1.5s", back)
	}
	if pf.unreachable() != 0 {
		t.Fatalf("unreachable=%d after recovery", pf.unreachable())
	}
	if n := len(logs.Lines("level=WARN", `msg="peer unreachable"`)); n != 1 {
		t.Fatalf("%d WARN lines, want 1", n)
	}

	// A second outage is news again; a peer that leaves the ring while down
	// is forgotten, once.
	pf.failed(a, down)
	pf.failed(b, down)
	if n := len(logs.Lines(`msg="peer unreachable"`)); n != 3 {
		t.Fatalf("%d 'peer unreachable' lines, want 3", n)
	}
	clock.advance(time.Second)
	pf.keep(map[string]bool{"node-b": true})
	pf.keep(map[string]bool{"node-b": true})
	if gone := logs.Lines(`msg="unreachable peer left the ring"`); len(gone) != 1 || !strings.Contains(gone[0], "peer=node-a") {
		t.Fatalf("left-the-ring lines: %q", gone)
	}
	if pf.unreachable() != 1 {
		t.Fatalf("unreachable=%d, want 1 (node-b)", pf.unreachable())
	}
}

// TestConcurrentFailuresLogOnce: many requests failing against one peer at
// once produce one line.
func TestConcurrentFailuresLogOnce(t *testing.T) {
	t.Parallel()
	logs := &testutil.Logs{}
	pf := newPeerFailures(logs.Logger(), newFakeClock().now, nil)
	a := ring.Member{ID: "node-a"}
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() { pf.failed(a, errors.New("down")) })
	}
	wg.Wait()
	wg.Go(func() { pf.ok(a) })
	wg.Go(func() { pf.ok(a) })
	wg.Wait()
	if n, m := len(logs.Lines(`msg="peer unreachable"`)), len(logs.Lines(`msg="peer reachable again"`, "failures=64")); n != 1 || m != 1 {
		t.Fatalf("%d unreachable and %d recovery lines, want 1 and 1:\n%s", n, m, logs.Lines(""))
	}
}

// TestOnlyUnreachablePeersCountAsFailures: an answer (bad input, a refusal)
// is not an outage, and a failure caused by the caller giving up says
// nothing about the peer.
func TestOnlyUnreachablePeersCountAsFailures(t *testing.T) {
	t.Parallel()
	logs := &testutil.Logs{}
	pf := newPeerFailures(logs.Logger(), newFakeClock().now, nil)
	a := ring.Member{ID: "node-a"}
	live := context.Background()
	gone, cancel := context.WithCancel(live)
	cancel()
	for _, c := range []struct {
		ctx  context.Context
		err  error
		down bool
	}{
		{live, transfer.FromStatus(status.Error(codes.InvalidArgument, "bad id")), false},
		{live, transfer.FromStatus(status.Error(codes.FailedPrecondition, "schema")), false},
		{live, fmt.Errorf("node x sent a malformed frame"), false},
		{gone, status.Error(codes.Canceled, "context canceled"), false},
		{gone, status.Error(codes.Unavailable, "connection refused"), false},
		{live, status.Error(codes.Unavailable, "connection refused"), true},
		{live, transfer.FromStatus(status.Error(codes.DeadlineExceeded, "too slow")), true},
		{live, fmt.Errorf("node x: %w", status.Error(codes.Canceled, "stuck step cancelled")), true},
	} {
		pf.note(c.ctx, a, c.err)
		if got := pf.unreachable() == 1; got != c.down {
			t.Errorf("%v (caller done: %v): counted as unreachable %v, want %v", c.err, c.ctx.Err() != nil, got, c.down)
		}
		pf.note(live, a, nil)
	}
}
