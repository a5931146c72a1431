package coord

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// errIdleStream ends a put whose engine sent nothing for IdleTimeout: its
// staged chunks are aborted so that a stalled engine holds no memory.
var errIdleStream = fmt.Errorf("put stream idle: %w", context.DeadlineExceeded)

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

// idleWatch runs recv, the engine's side of a put's data phase, on a
// goroutine the coordinator owns (Close waits for it) and returns its error,
// unless no frame arrives for IdleTimeout: then it returns errIdleStream at
// once, leaving the goroutine to end when the handler returns and gRPC
// cancels the stream. last is set by recv at every message (UnixNano of
// cfg.Now).
func (c *Coordinator) idleWatch(recv func() error, last *atomic.Int64) error {
	idle := c.cfg.IdleTimeout
	if idle <= 0 {
		return recv()
	}
	done := make(chan error, 1)
	c.recv.Go(func() { done <- recv() })
	tick := time.NewTicker(max(idle/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if since := c.cfg.Now().Sub(time.Unix(0, last.Load())); since >= idle {
				return fmt.Errorf("%w: no message from the engine for %s (limit %s)", errIdleStream, since.Round(time.Millisecond), idle)
			}
		}
	}
}
