package netguard

import (
	"net"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// shedListener is a fakeListener whose accept needs a descriptor, as
// accept4's does: while exhausted it fails with EMFILE even with
// connections queued, except once after the reserve gave one back; it
// takes deadlines.
type shedListener struct {
	*fakeListener
	free     bool // the reserve gave a descriptor back
	deadline time.Time
}

func (s *shedListener) SetDeadline(t time.Time) error {
	s.mu.Lock()
	s.deadline = t
	s.mu.Unlock()
	return nil
}

func (s *shedListener) Accept() (net.Conn, error) {
	s.mu.Lock()
	switch {
	case s.free:
		s.free = false
		if len(s.queue) > 0 {
			c := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return c, nil
		}
		d := s.deadline
		s.mu.Unlock()
		time.Sleep(time.Until(d))
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.ErrDeadlineExceeded}
	case s.exhausted && !s.closed:
		s.mu.Unlock()
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	s.mu.Unlock()
	return s.fakeListener.Accept()
}

// fakeReserve hands its listener one descriptor per release.
type fakeReserve struct {
	l    *shedListener
	held bool
}

func (r *fakeReserve) release() bool {
	if !r.held {
		return false
	}
	r.held = false
	r.l.mu.Lock()
	r.l.free = true
	r.l.mu.Unlock()
	return true
}

func (r *fakeReserve) restore()     { r.held = true }
func (r *fakeReserve) close() error { r.held = false; return nil }

// TestAStarvedListenerShedsQueuedConnections: out of descriptors, a
// listener closes the connections queued on it (with the reserve
// descriptor, one at a time) instead of leaving them to wait for their
// clients' timeouts, counts them refused (cap "descriptors"), stays
// starved, and accepts again once descriptors are back.
func TestAStarvedListenerShedsQueuedConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := quietGuard()
		g.spare.close()
		f := &shedListener{fakeListener: newFakeListener()}
		r := &fakeReserve{l: f, held: true}
		g.spare = r
		l := g.Wrap("grpc", f, Limits{})
		l.probe = func() error { return syscall.EMFILE }
		f.setExhausted(true)
		accepted := make(chan net.Conn, 4)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted <- c
			}
		}()

		queued := []*fakeConn{newFakeConn("10.0.0.1", 1), newFakeConn("10.0.0.2", 2), newFakeConn("10.0.0.3", 3)}
		for _, c := range queued {
			f.push(c)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		for i, c := range queued {
			if !c.closed.Load() {
				t.Fatalf("queued connection %d is still waiting while the listener has no descriptor; want it shed", i)
			}
		}
		if n := testutil.ToFloat64(g.refused.WithLabelValues("grpc", "descriptors")); n != 3 {
			t.Fatalf("kvring_connections_refused_total{cap=descriptors} = %v, want 3", n)
		}
		if len(accepted) != 0 {
			t.Fatal("a shed connection was handed to the server")
		}
		if g.Starved() == nil || !r.held {
			t.Fatalf("after shedding: starved %v, reserve held %v; want starved and the reserve taken back", g.Starved(), r.held)
		}

		f.setExhausted(false)
		l.probe = func() error { return nil }
		time.Sleep(2 * time.Second)
		synctest.Wait()
		wantAccepted(t, f.fakeListener, accepted)
		l.Close()
		synctest.Wait()
	})
}
