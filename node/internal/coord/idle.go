package coord

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvring/kvring/transfer"
)

// errIdleStream ends a put whose engine sent nothing for IdleTimeout (before
// its begin message, or in its data phase), or whose bytes arrive slower
// than MinPutRate: its staged chunks are aborted so that a stalled or
// trickling engine holds no memory.
var errIdleStream = fmt.Errorf("put stream idle: %w", context.DeadlineExceeded)

// errClosing refuses a put's receiver once Close has begun.
var errClosing = fmt.Errorf("%w: the node is shutting down", transfer.ErrUnavailable)

// sinkGate lets the receiving goroutine forward frames to the owners until
// the put is abandoned; after close no frame reaches an owner, so the
// handler may abort and close the owner sessions while the receiver is
// still blocked in RecvMsg. Safe for concurrent use.
type sinkGate struct {
	mu     sync.Mutex
	closed bool
}

// enter holds the gate open for one write; false once it is closed.
func (g *sinkGate) enter() bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	return true
}

func (g *sinkGate) exit() { g.mu.Unlock() }

// close waits for a write in progress, then lets none through.
func (g *sinkGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// receivers are the goroutines that read engines' put streams on behalf of
// their handlers (idleWatch): a handler that gives up on its engine returns
// without them, and they end when gRPC cancels the stream. (The
// coordinator's other bounded background work, releasing departed clients'
// leases, runs on a receivers group too.) Close waits for
// them. A mutex-guarded closed flag orders every Add before Close's Wait:
// a handler still running after the server stopped (grpc.Server.Stop does
// not wait for handlers) finds it closed and starts none. Safe for
// concurrent use.
type receivers struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// start runs f on a new receiver; false once close was called.
func (r *receivers) start(f func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Go(f)
	return true
}

// close lets no new receiver start and waits for those running.
func (r *receivers) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
}

// progress is what a put's receiver reports as messages arrive: when the
// last one came and how many data bytes came in all. Safe for concurrent
// use.
type progress struct {
	start time.Time
	last  atomic.Int64 // UnixNano of cfg.Now at the last message
	bytes atomic.Int64
}

func newProgress(now time.Time) *progress {
	p := &progress{start: now}
	p.last.Store(now.UnixNano())
	return p
}

// seen records one message of n data bytes at now.
func (p *progress) seen(now time.Time, n int) {
	p.last.Store(now.UnixNano())
	p.bytes.Add(int64(n))
}

// stalled says why a put whose data phase waits for want bytes should end
// at now, or nil: no message for idle, or (past idle) fewer bytes than
// rate per second since it began (rate 0: no minimum).
func (p *progress) stalled(now time.Time, idle time.Duration, rate, want int64) error {
	if since := now.Sub(time.Unix(0, p.last.Load())); since >= idle {
		return fmt.Errorf("%w: no message from the engine for %s (limit %s)", errIdleStream, since.Round(time.Millisecond), idle)
	}
	el := now.Sub(p.start)
	if rate <= 0 || want <= 0 || el < idle {
		return nil
	}
	expect := min(want, int64(el.Seconds()*float64(rate)))
	if got := p.bytes.Load(); got < expect {
		return fmt.Errorf("%w: %d of %d bytes arrived in %s, slower than the minimum of %d bytes/s",
			errIdleStream, got, want, el.Round(time.Millisecond), rate)
	}
	return nil
}

// idleWatch runs recv, the engine's side of a put's begin or data phase, on
// a receiver the coordinator owns (Close waits for it) and returns its
// error, unless the engine stalls (progress.stalled, checked four times per
// IdleTimeout): then it returns errIdleStream at once, leaving the receiver
// to end when the handler returns and gRPC cancels the stream. recv reports
// every message to p; want is the data bytes the phase waits for (0: none,
// no minimum rate).
func (c *Coordinator) idleWatch(recv func() error, p *progress, want int64) error {
	idle := c.cfg.IdleTimeout
	if idle <= 0 {
		return recv()
	}
	done := make(chan error, 1)
	if !c.recv.start(func() { done <- recv() }) {
		return errClosing
	}
	tick := time.NewTicker(max(idle/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if err := p.stalled(c.cfg.Now(), idle, c.cfg.MinPutRate, want); err != nil {
				return err
			}
		}
	}
}
