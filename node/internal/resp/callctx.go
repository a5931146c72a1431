package resp

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callCtx is a command's context: its connection's values and
// cancellation, and a deadline CallTimeout after the command began, whose
// timer is only made when something waits on the context or asks its
// error (Done, Err). Most commands (a GET of a key held here) never do,
// and context.WithTimeout's timer and allocations per command were a
// measurable part of such a GET. It is safe for concurrent use, as every
// context is; end releases it when the command returns.
type callCtx struct {
	parent   context.Context
	deadline time.Time

	mu     sync.Mutex
	inner  atomic.Pointer[context.Context] // set once the timer is made
	cancel context.CancelFunc
	ended  bool
}

func newCallCtx(parent context.Context, timeout time.Duration) *callCtx {
	return &callCtx{parent: parent, deadline: time.Now().Add(timeout)}
}

// start returns the context that carries the deadline, making it on first
// use (one already cancelled after end).
func (c *callCtx) start() context.Context {
	if p := c.inner.Load(); p != nil {
		return *p
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.inner.Load(); p != nil {
		return *p
	}
	ctx, cancel := context.WithDeadline(c.parent, c.deadline)
	if c.ended {
		cancel()
	}
	c.cancel = cancel
	c.inner.Store(&ctx)
	return ctx
}

// end cancels the context: the command returned.
func (c *callCtx) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = true
	if c.cancel != nil {
		c.cancel()
	}
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *callCtx) Done() <-chan struct{}       { return c.start().Done() }
func (c *callCtx) Err() error                  { return c.start().Err() }

// Value answers from the deadline's context once it exists (so contexts
// derived from this one attach to its cancellation directly, without a
// goroutine each), from the parent before: the same values.
func (c *callCtx) Value(key any) any {
	if p := c.inner.Load(); p != nil {
		return (*p).Value(key)
	}
	return c.parent.Value(key)
}
