package resp

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kvring/kvring/internal/fairshare"
	"github.com/kvring/kvring/store"
)

// valueShares is the budget of values being received (Config.MaxValueBytes):
// a SET's value is read into shared memory before its command runs, and a
// client that declares large values and sends them slowly holds that memory
// meanwhile. The budget is shared among clients by package fairshare's rule
// (one client alone may hold three quarters, and another always finds a
// quarter free), so one client's many slow SETs cannot take the memory that
// sealed chunks and other clients' writes need. A client is named as the
// node's budgets name one (package tenant: its token after AUTH, else its
// address; on loopback its connection). A connection's charges end when its
// request has run. Safe for concurrent use.
type valueShares struct {
	mu      sync.Mutex
	pool    *fairshare.Pool // nil: no budget
	refused int64           // values refused so far
	waiting int             // values waiting for room now
	// gave is closed (and replaced) when a holding ends: what a value
	// waiting for room waits on. nil while nobody waits.
	gave chan struct{}
}

func newValueShares(total int64) *valueShares {
	if total <= 0 {
		return &valueShares{}
	}
	return &valueShares{pool: fairshare.NewPool(total)}
}

// take charges a value of n bytes to client. Past the budget or the
// client's share, a client that holds nothing of it yet (first) waits
// for other clients' values to end, until deadline (its command's): many
// clients sending large values at once are served in turn, as a plain
// redis-server serves them, instead of refused. A value that cannot fit
// however long it waits (over what one client may hold alone), one past
// the deadline, and one of a client that already holds some (its own
// values would have to end first: a request's values are charged
// together) are refused at once with an error wrapping store.ErrNoSpace
// (an -OOM reply). Blocks at most until deadline, or until ctx ends (the
// connection closes): then ctx's error.
func (v *valueShares) take(ctx context.Context, client string, n int64, first bool, deadline time.Time) error {
	if v.pool == nil {
		return nil
	}
	var timer *time.Timer
	for {
		v.mu.Lock()
		err := v.pool.Take(client, n)
		if err == nil {
			v.mu.Unlock()
			return nil
		}
		wait := time.Until(deadline)
		if !first || n > v.pool.MaxAlone() || wait <= 0 {
			v.refused++
			v.mu.Unlock()
			return fmt.Errorf("%w: cannot take a value of %d bytes: %w of the budget of values being received",
				store.ErrNoSpace, n, err)
		}
		if v.gave == nil {
			v.gave = make(chan struct{})
		}
		gave := v.gave
		v.waiting++
		v.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		var done error
		select {
		case <-gave:
		case <-timer.C:
			deadline = time.Time{} // one more try, then refused
		case <-ctx.Done():
			done = ctx.Err()
		}
		v.mu.Lock()
		v.waiting--
		v.mu.Unlock()
		if done != nil {
			return fmt.Errorf("the connection ended while its value waited for room: %w", done)
		}
	}
}

// waiters is how many values wait for room in take now.
func (v *valueShares) waiters() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.waiting
}

// refusals is how many values take refused.
func (v *valueShares) refusals() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.refused
}

// held is the bytes charged now.
func (v *valueShares) held() int64 {
	if v.pool == nil {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.pool.InUse()
}

// give returns what take charged.
func (v *valueShares) give(client string, n int64) {
	if v.pool == nil || n <= 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pool.Give(client, n)
	if v.gave != nil {
		close(v.gave)
		v.gave = nil
	}
}
