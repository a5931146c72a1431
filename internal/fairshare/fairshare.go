// Package fairshare splits one budget (bytes of staged writes, of pins, of
// unsealed blobs) among the clients that use it, so that a client alone may
// use most of it and yet never blocks a second one. It is pure: no clock, no
// goroutines, no locks; the owner of the budget calls it under its own lock.
//
// The rule. With total bytes in the budget and k clients holding some of it
// (the asking client counted), a client may take n more bytes when either
//
//   - its holding stays within an even share among k+1 clients
//     (used+n ≤ total/(k+1)): one share is always left for a newcomer, or
//   - the whole budget stays at least Reserve below total
//     (inUse+n ≤ total−Reserve), however much the client holds.
//
// A client alone may so hold total−Reserve (three quarters by default), and a
// second client finds at least Reserve free, whatever the first one does. As
// more clients arrive, a client above its share takes nothing more until its
// holding ends (the budgets that use this package all end holdings by time:
// stage leases and put timeouts, pin leases, connections).
package fairshare

import "fmt"

// DefaultReserveDiv is the part of a budget kept free for newcomers when the
// Ledger's Reserve is not set: total/DefaultReserveDiv, a quarter.
const DefaultReserveDiv = 4

// Ledger is what each client holds of one budget. Not safe for concurrent
// use: the budget's owner calls it under its own lock. The zero value is not
// usable; see New.
type Ledger struct {
	total   int64
	reserve int64
	used    map[string]int64
}

// New returns a Ledger of a budget of total bytes that keeps reserve bytes
// free for newcomers (0: total/DefaultReserveDiv).
func New(total, reserve int64) *Ledger {
	if reserve <= 0 {
		reserve = total / DefaultReserveDiv
	}
	return &Ledger{total: total, reserve: min(reserve, total), used: make(map[string]int64)}
}

// Total is the budget's size.
func (l *Ledger) Total() int64 { return l.total }

// Used is what client holds.
func (l *Ledger) Used(client string) int64 { return l.used[client] }

// Clients is the number of clients holding something.
func (l *Ledger) Clients() int { return len(l.used) }

// Limit is the most client may hold now, when the budget as a whole has
// inUse bytes in use (its own holding included): max(its share among the
// active clients and one newcomer, what keeps Reserve free).
func (l *Ledger) Limit(client string, inUse int64) int64 {
	k := int64(len(l.used))
	if l.used[client] == 0 {
		k++ // the asker becomes active
	}
	share := l.total / (k + 1)
	spare := l.total - l.reserve - inUse + l.used[client]
	return max(share, spare)
}

// MaxAlone is the most a client may hold when no other holds anything:
// what a holding larger than it can never get, however long it waits.
func (l *Ledger) MaxAlone() int64 { return max(l.total/2, l.total-l.reserve) }

// Take charges n bytes to client if the rule allows it, and reports whether
// it did. inUse is what the budget as a whole has in use before the charge
// (holdings of callers that are no client count too). It never checks the
// total: the budget's owner does.
func (l *Ledger) Take(client string, n, inUse int64) error {
	if n <= 0 {
		return nil
	}
	if lim := l.Limit(client, inUse); l.used[client]+n > lim {
		return fmt.Errorf("client %s holds %d bytes, %d more would pass its share of %d (%d clients, %d of %d in use)",
			client, l.used[client], n, lim, max(1, len(l.used)), inUse, l.total)
	}
	l.used[client] += n
	return nil
}

// Give returns n bytes client held. A client that holds nothing is
// forgotten.
func (l *Ledger) Give(client string, n int64) {
	if n <= 0 {
		return
	}
	left := l.used[client] - n
	if left <= 0 {
		delete(l.used, client)
		return
	}
	l.used[client] = left
}
