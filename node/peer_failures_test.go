package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/client"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the log lines that contain every one of parts.
func (b *logBuffer) lines(parts ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for line := range strings.Lines(b.buf.String()) {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

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
	logs := &logBuffer{}
	clock := newFakeClock()
	var total atomic.Int64
	pf := newPeerFailures(logs.logger(), clock.now, countInc(&total))
	a := ring.Member{ID: "node-a", Addr: "127.0.0.1:1"}
	b := ring.Member{ID: "node-b", Addr: "127.0.0.1:2"}
	down := status.Error(codes.Unavailable, "connection refused")

	pf.ok(a) // healthy: nothing to say
	for range 5 {
		pf.failed(a, down)
		clock.advance(300 * time.Millisecond)
	}
	pf.ok(b)
	if n := len(logs.lines(`msg="peer unreachable"`, "peer=node-a", "connection refused")); n != 1 {
		t.Fatalf("%d 'peer unreachable' lines for 5 failures, want 1:\n%s", n, logs.lines(""))
	}
	if pf.unreachable() != 1 || total.Load() != 5 {
		t.Fatalf("unreachable=%d failures=%d, want 1 and 5", pf.unreachable(), total.Load())
	}
	pf.ok(a)
	pf.ok(a)
	back := logs.lines(`msg="peer reachable again"`)
	if len(back) != 1 || !strings.Contains(back[0], "peer=node-a") || !strings.Contains(back[0], "failures=5") ||
		!strings.Contains(back[0], "duration=1.5s") || !strings.Contains(back[0], "level=INFO") {
		t.Fatalf("recovery lines: %q, want one INFO with failures=5 duration=1.5s", back)
	}
	if pf.unreachable() != 0 {
		t.Fatalf("unreachable=%d after recovery", pf.unreachable())
	}
	if n := len(logs.lines("level=WARN", `msg="peer unreachable"`)); n != 1 {
		t.Fatalf("%d WARN lines, want 1", n)
	}

	// A second outage is news again; a peer that leaves the ring while down
	// is forgotten, once.
	pf.failed(a, down)
	pf.failed(b, down)
	if n := len(logs.lines(`msg="peer unreachable"`)); n != 3 {
		t.Fatalf("%d 'peer unreachable' lines, want 3", n)
	}
	clock.advance(time.Second)
	pf.keep(map[string]bool{"node-b": true})
	pf.keep(map[string]bool{"node-b": true})
	if gone := logs.lines(`msg="unreachable peer left the ring"`); len(gone) != 1 || !strings.Contains(gone[0], "peer=node-a") {
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
	logs := &logBuffer{}
	pf := newPeerFailures(logs.logger(), newFakeClock().now, nil)
	a := ring.Member{ID: "node-a"}
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() { pf.failed(a, errors.New("down")) })
	}
	wg.Wait()
	wg.Go(func() { pf.ok(a) })
	wg.Go(func() { pf.ok(a) })
	wg.Wait()
	if n, m := len(logs.lines(`msg="peer unreachable"`)), len(logs.lines(`msg="peer reachable again"`, "failures=64")); n != 1 || m != 1 {
		t.Fatalf("%d unreachable and %d recovery lines, want 1 and 1:\n%s", n, m, logs.lines(""))
	}
}

// TestOnlyUnreachablePeersCountAsFailures: an answer (bad input, a refusal)
// is not an outage, and a failure caused by the caller giving up says
// nothing about the peer.
func TestOnlyUnreachablePeersCountAsFailures(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	pf := newPeerFailures(logs.logger(), newFakeClock().now, nil)
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

// flakyPeer passes Peer calls to a real owner, or fails them with
// Unavailable while down is set.
type flakyPeer struct {
	kvringv1.PeerServer
	down *atomic.Bool
}

var errFlaky = status.Error(codes.Unavailable, "flaky peer is down")

func (f flakyPeer) Prepare(s grpc.BidiStreamingServer[kvringv1.PrepareRequest, kvringv1.PrepareResponse]) error {
	if f.down.Load() {
		return errFlaky
	}
	return f.PeerServer.Prepare(s)
}

func (f flakyPeer) Has(ctx context.Context, req *kvringv1.HasRequest) (*kvringv1.HasResponse, error) {
	if f.down.Load() {
		return nil, errFlaky
	}
	return f.PeerServer.Has(ctx, req)
}

func (f flakyPeer) Fetch(req *kvringv1.FetchRequest, s grpc.ServerStreamingServer[kvringv1.FetchResponse]) error {
	if f.down.Load() {
		return errFlaky
	}
	return f.PeerServer.Fetch(req, s)
}

// TestAPeerOutageIsLoggedOnceAcrossRequests: while an owner is down, a
// coordinator's lookups, puts and gets keep working and the outage is one
// WARN line, counted in kvring_peer_failures_total; the first request after
// the owner is back logs one INFO line with the same count.
func TestAPeerOutageIsLoggedOnceAcrossRequests(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	coord, victim := tc.nodes[0], tc.nodes[2]
	logs := &logBuffer{}
	coord.svc.coord.peers.log = logs.logger() // before any request: nothing reads it yet

	// The coordinators reach the victim through a proxy that can fail.
	var down atomic.Bool
	proxy := serveFake(t, func(gs *grpc.Server) {
		kvringv1.RegisterPeerServer(gs, flakyPeer{PeerServer: victim.svc.peer, down: &down})
	})
	var members []ring.Member
	for _, nd := range tc.nodes {
		m := ring.Member{ID: nd.id, Addr: nd.addr}
		if nd == victim {
			m.Addr = proxy
		}
		members = append(members, m)
	}
	tc.useMembers(t, members)

	c := routedClient(t, coord.addr, 3, 1, func(cfg *client.Config) { cfg.DisableRouting = true }) // every node owns every chunk; all calls through coord
	ctx := context.Background()
	var chunks []client.Chunk
	var ids []client.ChunkID
	for i := uint64(0); i < 6; i++ {
		chunks = append(chunks, chunkOf(9000+i, 10_000))
		ids = append(ids, chunks[i].ID)
	}
	if _, err := c.Put(ctx, chunks[:5]); err != nil {
		t.Fatal(err)
	}

	down.Store(true)
	for range 3 {
		lr, err := c.Lookup(ctx, ids[:5], 0)
		if err != nil || lr.Held != 5 {
			t.Fatalf("lookup while an owner is down: %+v %v", lr, err)
		}
	}
	res, err := c.Put(ctx, chunks[5:])
	if err != nil || res[0].Status != client.Stored || !res[0].Degraded {
		t.Fatalf("put while an owner is down: %+v %v", res, err)
	}
	got, err := c.Get(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !g.Found {
			t.Fatalf("get %d while an owner is down: %q", i, g.Reason)
		}
	}
	s := scrape(t, coord.reg)
	failures := s.get(t, "kvring_peer_failures_total")
	if failures < 4 || s.get(t, "kvring_peers_unreachable") != 1 {
		t.Fatalf("failures=%v unreachable=%v, want ≥4 (3 lookups, a put) and 1", failures, s.get(t, "kvring_peers_unreachable"))
	}
	if warn := logs.lines("level=WARN", `msg="peer unreachable"`, "peer="+victim.id); len(warn) != 1 {
		t.Fatalf("%d 'peer unreachable' lines over %v failures, want 1:\n%s", len(warn), failures, logs.lines(""))
	}
	if n := len(logs.lines("peer unreachable")); n != 1 {
		t.Fatalf("%d 'peer unreachable' lines in all, want 1", n)
	}

	down.Store(false)
	if _, err := c.Lookup(ctx, ids, 0); err != nil {
		t.Fatal(err)
	}
	back := logs.lines("level=INFO", `msg="peer reachable again"`, "peer="+victim.id)
	if len(back) != 1 || !strings.Contains(back[0], fmt.Sprintf("failures=%d ", int(failures))) {
		t.Fatalf("recovery lines %q, want one with failures=%d", back, int(failures))
	}
	s2 := scrape(t, coord.reg)
	if s2.get(t, "kvring_peers_unreachable") != 0 || s2.get(t, "kvring_peer_failures_total") != failures {
		t.Fatalf("after recovery: unreachable=%v failures=%v", s2.get(t, "kvring_peers_unreachable"), s2.get(t, "kvring_peer_failures_total"))
	}
	checkNoCounterWentDown(t, s, s2)
}
