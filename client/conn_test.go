package client

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/transfer"
)

// logBuf collects JSON log lines; safe for concurrent use.
type logBuf struct{ testutil.Logs }

// count returns how many lines have exactly this message.
func (l *logBuf) count(msg string) int {
	return strings.Count(l.String(), `"msg":"`+msg+`"`)
}

// statusLog records the statuses passed to OnStateChange, collapsing repeats.
type statusLog struct {
	mu sync.Mutex
	s  []ConnStatus
}

func (r *statusLog) record(s ConnState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.s); n == 0 || r.s[n-1] != s.Status {
		r.s = append(r.s, s.Status)
	}
}

func (r *statusLog) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := make([]string, len(r.s))
	for i, s := range r.s {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}

// testConn is a conn under test with its log and state history.
type testConn struct {
	*conn
	logs     *logBuf
	statuses *statusLog
}

// newTestConn starts a conn with fast backoff and probes; change may adjust the config. It is closed at cleanup.
func newTestConn(t *testing.T, change func(*ConnConfig), seeds ...string) *testConn {
	t.Helper()
	tc := &testConn{logs: &logBuf{}, statuses: &statusLog{}}
	cfg := ConnConfig{
		Seeds:         seeds,
		DialTimeout:   time.Second,
		BackoffBase:   10 * time.Millisecond,
		BackoffMax:    100 * time.Millisecond,
		ProbeInterval: 200 * time.Millisecond,
		Logger:        slog.New(slog.NewJSONHandler(tc.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnStateChange: tc.statuses.record,
	}
	if change != nil {
		change(&cfg)
	}
	c, err := newConn(cfg)
	if err != nil {
		t.Fatalf("newConn: %v", err)
	}
	tc.conn = c
	t.Cleanup(func() {
		_ = c.close()
		if t.Failed() {
			t.Logf("conn log:\n%s", tc.logs)
		}
	})
	return tc
}

// testNode is a gRPC server that serves the standard health service.
type testNode struct {
	addr   string
	srv    *grpc.Server
	lis    net.Listener
	health *health.Server // nil when a custom health service was given
}

// startNode serves hs (the standard health server, SERVING, when nil) on a free port of 127.0.0.1, over real TCP.
// Tests in a synctest bubble use memNet.startNode instead.
func startNode(t *testing.T, hs healthpb.HealthServer) *testNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{addr: lis.Addr().String(), srv: grpc.NewServer(), lis: lis}
	if hs == nil {
		n.health = health.NewServer()
		hs = n.health
	}
	healthpb.RegisterHealthServer(n.srv, hs)
	go func() { _ = n.srv.Serve(lis) }()
	t.Cleanup(n.kill)
	return n
}

// kill stops the node hard: every connection is closed at once, and the listener too.
func (n *testNode) kill() {
	n.srv.Stop()
	_ = n.lis.Close()
}

// deadAddr returns a 127.0.0.1 address on which nothing listens (connections are refused).
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

// advance lets a synctest bubble's fake clock run for d (no real time) and then every goroutine of the bubble run
// until it blocks. Only inside a bubble.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// requireUnavailable checks that ready fails at once while not connected, with Unavailable wrapping
// errNotConnected and transfer.ErrUnavailable, in a message naming want. Only inside a synctest bubble: "at once"
// means no time passes on the bubble's fake clock, under a context that would let ready wait an hour. A ready
// that waited for a connection or for its context would let the clock run (it jumps whenever the whole bubble
// waits) and fail with the context's error at the latest.
func requireUnavailable(t *testing.T, c *conn, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	start := time.Now()
	cc, err := c.ready(ctx)
	if took := time.Since(start); took != 0 {
		t.Errorf("ready let %s of the fake clock pass while not connected, want it to fail at once", took)
	}
	if cc != nil || err == nil {
		t.Fatalf("ready = %v, %v; want an error", cc, err)
	}
	if got := status.Code(err); got != codes.Unavailable {
		t.Errorf("status.Code(ready error) = %s, want Unavailable (err: %v)", got, err)
	}
	if !errors.Is(err, errNotConnected) || !errors.Is(err, transfer.ErrUnavailable) {
		t.Errorf("ready error %q does not wrap errNotConnected and transfer.ErrUnavailable", err)
	}
	if got := transfer.Code(err); got != codes.Unavailable {
		t.Errorf("transfer.Code(ready error) = %s, want Unavailable", got)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "kvring: unavailable: not connected to any kvring node (") ||
		!strings.Contains(msg, want) {
		t.Errorf("ready error = %q, want the not-connected message naming %q", msg, want)
	}
}

// The tests below that are about time (fails at once, notices within, waits, interrupts) run in a synctest bubble
// on memNet, an in-memory network: the clock is fake, so their assertions are exact and do not depend on how
// loaded the machine is. TestConnSkipsDeadSeed and TestConnCloseIsIdempotentAndStopsTheLoop run over real TCP.

// TestConnNewNeverBlocksAndReadyFailsFastWithCause: newConn returns at once, even when its node accepts the
// connection and never answers the health check; while not connected, ready fails at once naming the state, the
// attempt and the last error, and the loop keeps trying.
func TestConnNewNeverBlocksAndReadyFailsFastWithCause(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memNet
		hung := &hangingHealth{}
		hung.hang.Store(true)
		silent := n.startNode(t, "10.0.0.2:9600", hung)
		start := time.Now()
		h := n.newConn(t, nil, silent.addr)
		if took := time.Since(start); took != 0 {
			t.Errorf("newConn to a node that never answers took %s of the fake clock, want it to return at once", took)
		}
		requireUnavailable(t, h.conn, "connecting "+silent.addr+", attempt 1")

		const addr = "10.0.0.1:9600" // nothing listens
		c := n.newConn(t, nil, addr)
		if s := c.State(); s.Status != ConnConnecting || s.Addr != addr {
			t.Errorf("initial state = %+v, want connecting to %s", s, addr)
		}
		requireUnavailable(t, c.conn, "connecting")

		// The loop keeps trying, and ready names the cause and the attempt.
		within(t, 5*time.Second, "attempt 3", func() bool { return c.State().Attempt >= 3 })
		s := c.State()
		if s.Status != ConnConnecting || !strings.Contains(s.LastError, "connection refused") {
			t.Errorf("state = %+v, want connecting with last error connection refused", s)
		}
		requireUnavailable(t, c.conn, "last error: "+addr+": health check: Unavailable")
		requireUnavailable(t, c.conn, "connection refused")
		requireUnavailable(t, c.conn, "connecting, attempt")
		last := s.Attempt
		within(t, 5*time.Second, "more attempts", func() bool { return c.State().Attempt > last })
		if n := c.logs.count("connected to kvring node"); n != 0 {
			t.Errorf("logged %d connections with no server", n)
		}
	})
}

func TestConnConnectsByItselfWhenServerStartsLater(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memNet
		const addr = "10.0.0.1:9600"
		c := n.newConn(t, nil, addr)
		within(t, 5*time.Second, "a failed attempt", func() bool { return c.State().LastError != "" })

		n.startNode(t, addr, nil)
		within(t, 5*time.Second, "connected", func() bool {
			return c.State().Status == ConnConnected && c.logs.count("connected to kvring node") > 0
		})
		cc, err := c.ready(context.Background())
		if err != nil || cc == nil {
			t.Fatalf("ready after connecting = %v, %v", cc, err)
		}
		if cc.Target() != addr {
			t.Errorf("cc.Target() = %q, want %q", cc.Target(), addr)
		}
		if s := c.State(); s.Addr != addr || s.Attempt != 0 || s.LastError != "" {
			t.Errorf("connected state = %+v", s)
		}
		// Ten probe rounds (ProbeInterval 200ms) later, nothing more has been logged as a state change.
		advance(2 * time.Second)
		if n := c.logs.count("connected to kvring node"); n != 1 {
			t.Errorf(`"connected to kvring node" logged %d times, want 1`, n)
		}
		if got := c.statuses.String(); got != "connecting,connected" {
			t.Errorf("status history = %s, want connecting,connected", got)
		}
	})
}

func TestConnNoticesKilledServerWithinTwoSecondsWithoutCalls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memNet
		// Default probe settings: the transport watch, not a fast probe, must notice.
		c, node := n.connectedTo(t, func(cfg *ConnConfig) { cfg.ProbeInterval = 0 })
		node.kill()
		took := within(t, 2*time.Second, "the loss", func() bool { return c.State().Status != ConnConnected })
		if first := time.Duration(float64(defaultConnProbeInterval) * (1 - defaultConnJitter)); took >= first {
			t.Errorf("loss noticed %s after the kill, not before the first probe could run (%s): the transport watch missed it",
				took, first)
		}
		within(t, time.Second, "the loss log", func() bool { return c.logs.count("lost connection to kvring node") > 0 })

		s := c.State()
		if s.Status != ConnReconnecting || s.Addr != node.addr || s.LastError == "" {
			t.Errorf("state after loss = %+v, want reconnecting to %s with a reason", s, node.addr)
		}
		requireUnavailable(t, c.conn, "reconnecting, attempt")
		within(t, 5*time.Second, "attempt 3", func() bool { return c.State().Attempt >= 3 })
		if n := c.logs.count("lost connection to kvring node"); n != 1 {
			t.Errorf(`"lost connection to kvring node" logged %d times, want 1`, n)
		}
		if !strings.Contains(c.logs.String(), "connection refused") {
			t.Errorf("log does not name the cause (connection refused)")
		}
	})
}

func TestConnReconnectsToRestartedServerOnSameAddress(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memNet
		c, node := n.connectedTo(t, nil)
		c.conn.reportFailure("elsewhere:1", errors.New("ignored: not the connected node"))
		before, _ := c.ready(context.Background())
		node.kill()
		within(t, 2*time.Second, "the loss", func() bool {
			return c.State().Status == ConnReconnecting && c.logs.count("lost connection to kvring node") > 0
		})
		requireUnavailable(t, c.conn, "reconnecting")
		// The lost connection is retired: never handed out again, left open for
		// calls in flight, and closed at the latest when the client closes.
		c.conn.retireMu.Lock()
		_, retired := c.conn.retiring[before]
		c.conn.retireMu.Unlock()
		if !retired {
			t.Fatal("the lost ClientConn is not being retired")
		}

		n.startNode(t, node.addr, nil)
		within(t, 5*time.Second, "connected again", func() bool {
			return c.State().Status == ConnConnected && c.logs.count("connected again") > 0
		})
		cc, err := c.ready(context.Background())
		if err != nil {
			t.Fatalf("ready after reconnecting: %v", err)
		}
		if _, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("call on the new connection: %v", err)
		}
		for msg, want := range map[string]int{
			"connected to kvring node": 1, "lost connection to kvring node": 1, "connected again": 1,
		} {
			if got := c.logs.count(msg); got != want {
				t.Errorf("%q logged %d times, want %d", msg, got, want)
			}
		}
		if c.logs.count("reconnecting") < 1 {
			t.Errorf(`no "reconnecting" line`)
		}
		if got := c.statuses.String(); got != "connecting,connected,reconnecting,connected" {
			t.Errorf("status history = %s", got)
		}
		c.conn.close()
		if before.GetState() != connectivity.Shutdown {
			t.Error("the retired ClientConn outlived the client's close")
		}
	})
}

func TestConnSkipsDeadSeed(t *testing.T) {
	t.Parallel()
	dead := deadAddr(t)
	n := startNode(t, nil)
	c := newTestConn(t, nil, dead, n.addr)
	testutil.Eventually(t, "connected", 10*time.Second, func() bool { return c.State().Status == ConnConnected })
	if s := c.State(); s.Addr != n.addr {
		t.Errorf("connected to %s, want the live seed %s", s.Addr, n.addr)
	}
	testutil.Eventually(t, "the log", 10*time.Second, func() bool { return c.logs.count("connected to kvring node") == 1 })
	if !strings.Contains(c.logs.String(), dead) {
		t.Errorf("log does not mention the failed attempt to %s", dead)
	}
}

func TestConnNoticesHungNodeByProbeTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memNet
		hs := &hangingHealth{}
		node := n.startNode(t, "10.0.0.1:9600", hs)
		const probeTimeout = 100 * time.Millisecond
		c := n.newConn(t, func(cfg *ConnConfig) {
			cfg.ProbeInterval = 50 * time.Millisecond
			cfg.ProbeTimeout = probeTimeout
		}, node.addr)
		within(t, 5*time.Second, "connected", func() bool { return c.State().Status == ConnConnected })

		hs.hang.Store(true) // the transport stays up; only the health check stops answering
		took := within(t, 2*time.Second, "the loss", func() bool { return c.State().Status == ConnReconnecting })
		// A check that times out on a READY transport is repeated once before the node is declared lost.
		if took < 2*probeTimeout {
			t.Errorf("hung node declared lost %s after it hung, before two probes could time out", took)
		}
		if s := c.State(); !strings.Contains(s.LastError, "no answer within 100ms") {
			t.Errorf("last error = %q, want the probe timeout", s.LastError)
		}
		hs.hang.Store(false)
		within(t, 5*time.Second, "connected again", func() bool { return c.logs.count("connected again") == 1 })
	})
}

// hangingHealth answers SERVING, or never answers while hang is set.
type hangingHealth struct {
	healthpb.UnimplementedHealthServer
	hang atomic.Bool
}

func (h *hangingHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.hang.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func TestConnReportFailureRechecksAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memNet
		// With an hour between probes, only the report can make the conn look again.
		c, node := n.connectedTo(t, func(cfg *ConnConfig) { cfg.ProbeInterval = time.Hour })
		node.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
		c.conn.reportFailure(node.addr, status.Error(codes.Unavailable, "node is draining"))
		if took := within(t, 2*time.Second, "the loss", func() bool { return c.State().Status == ConnReconnecting }); took != 0 {
			t.Errorf("the reported node was checked %s after the report, want at once", took)
		}
		if s := c.State(); !strings.Contains(s.LastError, "NOT_SERVING") {
			t.Errorf("last error = %q, want NOT_SERVING", s.LastError)
		}
	})
}

func TestConnCloseIsIdempotentAndStopsTheLoop(t *testing.T) {
	t.Parallel()
	n := startNode(t, nil)
	c := newTestConn(t, nil, n.addr)
	testutil.Eventually(t, "connected", 10*time.Second, func() bool { return c.State().Status == ConnConnected })
	cc, _ := c.ready(context.Background())

	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := c.close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	wg.Wait()
	if err := c.close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	select {
	case <-c.done:
	default:
		t.Fatal("the loop goroutine is still running after close")
	}
	if cc.GetState() != connectivity.Shutdown {
		t.Errorf("ClientConn is %s after close, want Shutdown", cc.GetState())
	}
	if s := c.State(); s.Status != ConnClosed {
		t.Errorf("state after close = %+v", s)
	}
	_, err := c.ready(context.Background())
	if !errors.Is(err, errConnClosed) || !errors.Is(err, transfer.ErrClientClosed) ||
		!strings.Contains(err.Error(), "closed") || status.Code(err) != codes.Canceled || transfer.Code(err) != codes.Canceled {
		t.Errorf("ready after close = %v (code %s), want the closed error", err, status.Code(err))
	}
	if n := c.logs.count("kvring connection closed"); n != 1 {
		t.Errorf(`"kvring connection closed" logged %d times, want 1`, n)
	}
	if got := c.statuses.String(); got != "connecting,connected,closed" {
		t.Errorf("status history = %s", got)
	}
}

func TestConnCloseInterruptsBackoff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memNet
		c := n.newConn(t, func(cfg *ConnConfig) { cfg.BackoffBase, cfg.BackoffMax = time.Hour, time.Hour }, "10.0.0.1:9600")
		within(t, time.Second, "attempt 2 (waiting an hour)", func() bool { return c.State().Attempt == 2 })
		start := time.Now()
		_ = c.close()
		if took := time.Since(start); took != 0 {
			t.Errorf("close took %s of the fake clock during a backoff wait of an hour, want it to return at once", took)
		}
	})
}

func TestConnInvalidConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]ConnConfig{
		"no seeds":        {},
		"no port":         {Seeds: []string{"localhost"}},
		"empty port":      {Seeds: []string{"127.0.0.1:9600", "localhost:"}},
		"negative dial":   {Seeds: []string{"127.0.0.1:9600"}, DialTimeout: -1},
		"base above max":  {Seeds: []string{"127.0.0.1:9600"}, BackoffBase: time.Second, BackoffMax: time.Millisecond},
		"jitter above 1":  {Seeds: []string{"127.0.0.1:9600"}, Jitter: 1.5},
		"negative probes": {Seeds: []string{"127.0.0.1:9600"}, ProbeInterval: -time.Second},
	} {
		c, err := newConn(cfg)
		if !errors.Is(err, errInvalidConnConfig) {
			t.Errorf("%s: newConn error = %v, want errInvalidConnConfig", name, err)
		}
		if c != nil {
			_ = c.close()
		}
	}
}

// slowHealth answers health checks SERVING after a delay of the bubble's
// clock: a node that takes a while to accept a new connection.
type slowHealth struct {
	healthpb.UnimplementedHealthServer
	delay time.Duration
}

func (h slowHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	time.Sleep(h.delay)
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// TestConnACallDuringTheFirstReconnectWaitsForIt: right after the connected
// node went away, while the first attempt to reconnect is under way (here to
// a node now answering on the same address, as behind a load balancer in a
// rolling restart), a call waits for that attempt and gets the new
// connection instead of failing; calls fail at once only after an attempt
// failed (TestConnNoticesKilledServerWithinTwoSecondsWithoutCalls).
func TestConnACallDuringTheFirstReconnectWaitsForIt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memNet
		c, node := n.connectedTo(t, nil)
		// The address now leads to another node (a load balancer's next
		// endpoint), slow to accept; the connected node starts draining.
		_ = node.lis.Close()
		n.startNode(t, node.addr, slowHealth{delay: 300 * time.Millisecond})
		node.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
		within(t, 3*time.Second, "the loss", func() bool { return c.State().Status == ConnReconnecting })
		if s := c.State(); s.Attempt != 1 {
			t.Fatalf("state %+v, want the first attempt under way", s)
		}
		start := time.Now()
		cc, err := c.ready(context.Background())
		if err != nil || cc == nil {
			t.Fatalf("a call during the first reconnect: %v, want the new connection", err)
		}
		if took := time.Since(start); took <= 0 || took > 300*time.Millisecond {
			t.Fatalf("the call waited %s of the bubble's clock, want the attempt's (≤ 300ms)", took)
		}
	})
}
