package netguard

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeListener hands out queued connections; with exhausted set and nothing
// queued it fails like accept4 without descriptors, otherwise it blocks
// until a connection is queued or it is closed.
type fakeListener struct {
	mu        sync.Mutex
	exhausted bool
	queue     []net.Conn
	wake      chan struct{}
	closed    bool
	accepts   int
}

func newFakeListener() *fakeListener { return &fakeListener{wake: make(chan struct{}, 1)} }

func (f *fakeListener) Accept() (net.Conn, error) {
	for {
		f.mu.Lock()
		f.accepts++
		switch {
		case f.closed:
			f.mu.Unlock()
			return nil, net.ErrClosed
		case len(f.queue) > 0:
			c := f.queue[0]
			f.queue = f.queue[1:]
			f.mu.Unlock()
			return c, nil
		case f.exhausted:
			f.mu.Unlock()
			return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
		}
		f.mu.Unlock()
		<-f.wake
	}
}

func (f *fakeListener) push(c net.Conn) {
	f.mu.Lock()
	f.queue = append(f.queue, c)
	f.mu.Unlock()
	f.poke()
}

func (f *fakeListener) setExhausted(v bool) {
	f.mu.Lock()
	f.exhausted = v
	f.mu.Unlock()
	f.poke()
}

func (f *fakeListener) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fakeListener) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.poke()
	return nil
}

func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9600} }

// fakeConn is a connection from addr that records its Close.
type fakeConn struct {
	net.Conn
	addr   *net.TCPAddr
	closed atomic.Bool
}

func newFakeConn(ip string, port int) *fakeConn {
	return &fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: port}}
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.addr }
func (c *fakeConn) Close() error         { c.closed.Store(true); return nil }

// wantAccepted queues a connection on f and checks that the server loop
// reading accepted gets it, unwrapped (no cap is set). Inside a synctest
// bubble.
func wantAccepted(t *testing.T, f *fakeListener, accepted <-chan net.Conn) {
	t.Helper()
	c := newFakeConn("10.0.0.1", 1)
	f.push(c)
	synctest.Wait()
	select {
	case got := <-accepted:
		if got != c {
			t.Fatalf("accepted %v, want the queued connection itself (no cap set: not wrapped)", got)
		}
	default:
		t.Fatal("the listener did not accept a queued connection once descriptors were back")
	}
}

func quietGuard() *Guard { return New(slog.New(slog.NewTextHandler(io.Discard, nil))) }

// A listener out of descriptors is not ended by the failure: it backs off
// (no spinning: a bounded number of retries over ten seconds), counts each
// failure, is reported starved meanwhile, and once descriptors are free again
// it is no longer starved and accepts the next connection.
func TestAStarvedListenerBacksOffAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := quietGuard()
		f := newFakeListener()
		l := g.Wrap("grpc", f, Limits{})
		var free atomic.Bool
		l.probe = func() error {
			if free.Load() {
				return nil
			}
			return syscall.EMFILE
		}
		accepted := make(chan net.Conn, 1)
		ended := make(chan error, 1)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					ended <- err
					return
				}
				accepted <- c
			}
		}()

		f.setExhausted(true)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if err := g.Starved(); err == nil || !errors.Is(err, syscall.EMFILE) {
			t.Fatalf("Starved while accept fails with EMFILE: %v, want an error wrapping EMFILE", err)
		}
		n := testutil.ToFloat64(g.acceptErrors.WithLabelValues("grpc"))
		// 5 ms doubling to 1 s: 8 retries reach 1.28 s, then one a second.
		if n < 5 || n > 25 {
			t.Fatalf("%v accept failures counted in 10 s, want a backed-off handful (5..25)", n)
		}
		if v := testutil.ToFloat64(g.starvedGauge.WithLabelValues("grpc")); v != 1 {
			t.Fatalf("kvring_accept_starved = %v while starved, want 1", v)
		}

		free.Store(true)
		f.setExhausted(false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if err := g.Starved(); err != nil {
			t.Fatalf("Starved after descriptors were freed: %v, want nil", err)
		}
		wantAccepted(t, f, accepted)

		// Close ends Accept, also during a backoff.
		f.setExhausted(true)
		time.Sleep(100 * time.Millisecond)
		l.Close()
		synctest.Wait()
		select {
		case err := <-ended:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
			}
		default:
			t.Fatal("Accept did not return after Close")
		}
		if err := g.Starved(); err != nil {
			t.Fatalf("Starved after Close: %v, want nil", err)
		}
	})
}

// A listener whose accept fails for another reason returns the error, as
// the wrapped listener would.
func TestOtherAcceptErrorsAreReturned(t *testing.T) {
	g := quietGuard()
	f := newFakeListener()
	f.Close()
	if _, err := g.Wrap("admin", f, Limits{}).Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener: %v, want net.ErrClosed", err)
	}
	if g.Starved() != nil {
		t.Fatal("a closed listener is reported starved")
	}
}

// Connections past the node cap or the per-address cap are closed at once
// and counted; closing an admitted connection makes room again.
func TestConnectionsPastTheCapsAreClosedAndCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := quietGuard()
		f := newFakeListener()
		l := g.Wrap("grpc", f, Limits{MaxConns: 3, MaxConnsPerAddr: 2})
		accepted := make(chan net.Conn, 16)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted <- c
			}
		}()
		a1, a2, a3 := newFakeConn("10.0.0.1", 1), newFakeConn("10.0.0.1", 2), newFakeConn("::ffff:10.0.0.1", 3)
		b1, c1 := newFakeConn("10.0.0.2", 1), newFakeConn("10.0.0.3", 1)
		for _, c := range []*fakeConn{a1, a2, a3, b1, c1} {
			f.push(c)
			synctest.Wait()
		}
		var got []net.Conn
		for len(accepted) > 0 {
			got = append(got, <-accepted)
		}
		if len(got) != 3 || !a3.closed.Load() || !c1.closed.Load() || a1.closed.Load() || b1.closed.Load() {
			t.Fatalf("admitted %d (want 3: a1, a2, b1); a3 closed %v (want true, per-address cap), c1 closed %v (want true, node cap)",
				len(got), a3.closed.Load(), c1.closed.Load())
		}
		if n := testutil.ToFloat64(g.refused.WithLabelValues("grpc", "addr")); n != 1 {
			t.Fatalf("refused by the address cap: %v, want 1", n)
		}
		if n := testutil.ToFloat64(g.refused.WithLabelValues("grpc", "node")); n != 1 {
			t.Fatalf("refused by the node cap: %v, want 1", n)
		}
		got[0].Close()
		got[0].Close() // a second Close uncounts nothing
		if l.Open() != 2 {
			t.Fatalf("%d connections counted open after one closed, want 2", l.Open())
		}
		a4 := newFakeConn("10.0.0.1", 4)
		f.push(a4)
		synctest.Wait()
		if a4.closed.Load() || len(accepted) != 1 {
			t.Fatal("a connection from an address below its cap again was refused")
		}
		l.Close()
		synctest.Wait()
	})
}
