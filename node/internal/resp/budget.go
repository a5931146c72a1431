package resp

import (
	"fmt"
	"sync/atomic"
)

// memBudget bounds the heap all connections together hold for what is not
// in shared memory: the arguments of requests that are not values (keys,
// options) beyond a small allowance per connection, and queued replies
// whose bytes are on the heap (values read from other nodes, large
// arrays). A connection's own limits (MaxRequestBytes, MaxReplyQueue) bound
// one client; this bounds ten thousand of them. Safe for concurrent use.
type memBudget struct {
	limit int64 // <= 0: no bound
	used  atomic.Int64
}

// take reserves n bytes, or reports false when that would pass the limit.
func (b *memBudget) take(n int64) bool {
	if b.limit <= 0 {
		b.used.Add(n)
		return true
	}
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// force reserves n bytes even past the limit: for a connection that holds
// nothing else queued, whose reply must leave for it to make progress.
func (b *memBudget) force(n int64) { b.used.Add(n) }

// give returns n bytes taken earlier.
func (b *memBudget) give(n int64) { b.used.Add(-n) }

// clientMemoryError is a request refused because the connections together
// hold the whole budget: the reply says so and the connection is closed
// (its request cannot be read past without holding it), as Redis evicts
// clients over maxmemory-clients.
type clientMemoryError struct{ need, used, limit int64 }

func (e *clientMemoryError) Error() string {
	return fmt.Sprintf("OOM the server's client memory is exhausted: this request needs %d more bytes, and connections hold %d of %d; retry later",
		e.need, e.used, e.limit)
}

// argAllowance is the argument bytes a connection holds without taking
// from the budget: every ordinary command fits.
const argAllowance = 64 << 10

// argOverhead is what the reader keeps per argument of a request besides
// its bytes (its span and slice header), charged for requests with many.
const argOverhead = 64

// charge makes sure the reader's budget reservation covers need bytes of
// argument memory beyond argAllowance.
func (rd *reader) charge(need int64) error {
	over := need - argAllowance - rd.charged
	if over <= 0 || rd.mem == nil {
		return nil
	}
	over = (over + argAllowance - 1) / argAllowance * argAllowance // in steps, not per argument
	if !rd.mem.take(over) {
		return &clientMemoryError{need: over, used: rd.mem.used.Load(), limit: rd.mem.limit}
	}
	rd.charged += over
	return nil
}

// uncharge returns the reader's reservation (its buffers were dropped).
func (rd *reader) uncharge() {
	if rd.mem != nil && rd.charged > 0 {
		rd.mem.give(rd.charged)
	}
	rd.charged = 0
}
