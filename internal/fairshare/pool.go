package fairshare

import (
	"errors"
	"fmt"
)

// ErrFull is a Take refused because the budget as a whole would pass its
// total, whatever the client's share.
var ErrFull = errors.New("the budget is full")

// Pool is a budget whose every holder is a client (the local socket's
// unsealed blobs, the Redis port's values being received): a Ledger and
// the bytes all clients hold together, so that Take checks the total as
// well as the client's share. Not safe for concurrent use, as Ledger.
type Pool struct {
	l     *Ledger
	inUse int64
}

// NewPool returns a Pool of total bytes that keeps a quarter free for
// newcomers (DefaultReserveDiv).
func NewPool(total int64) *Pool { return &Pool{l: New(total, 0)} }

// Total is the budget's size.
func (p *Pool) Total() int64 { return p.l.Total() }

// MaxAlone is the most one client may hold (Ledger.MaxAlone).
func (p *Pool) MaxAlone() int64 { return p.l.MaxAlone() }

// InUse is what all clients hold.
func (p *Pool) InUse() int64 { return p.inUse }

// Take charges n bytes to client, or refuses them: wrapping ErrFull past
// the total, or with the Ledger's error past the client's share.
func (p *Pool) Take(client string, n int64) error {
	if p.inUse+n > p.l.Total() {
		return fmt.Errorf("%w: %d bytes in use, at most %d", ErrFull, p.inUse, p.l.Total())
	}
	if err := p.l.Take(client, n, p.inUse); err != nil {
		return err
	}
	p.inUse += n
	return nil
}

// Give returns n bytes client held.
func (p *Pool) Give(client string, n int64) {
	if n <= 0 {
		return
	}
	p.inUse -= n
	p.l.Give(client, n)
}
