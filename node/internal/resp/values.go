package resp

import (
	"fmt"
	"sync"

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
}

func newValueShares(total int64) *valueShares {
	if total <= 0 {
		return &valueShares{}
	}
	return &valueShares{pool: fairshare.NewPool(total)}
}

// take charges a value of n bytes to client, or refuses it with an error
// wrapping store.ErrNoSpace (an -OOM reply) past the budget or the client's
// share.
func (v *valueShares) take(client string, n int64) error {
	if v.pool == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.pool.Take(client, n); err != nil {
		v.refused++
		return fmt.Errorf("%w: cannot take a value of %d bytes: %w of the budget of values being received",
			store.ErrNoSpace, n, err)
	}
	return nil
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
}
