package coord

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// peerFailures turns the outcomes of a coordinator's exchanges with its
// peers into one log line when a peer becomes unreachable and one when it
// answers again, instead of a line per failed request: the first failure of
// a run logs WARN "peer unreachable", later ones are only counted, and the
// first success after them logs INFO "peer reachable again" with the count
// and how long the outage lasted. The caller drives time (now). Safe for
// concurrent use; never blocks beyond a short lock, and ok costs one atomic
// load while every peer answers.
type peerFailures struct {
	log *slog.Logger
	now func() time.Time
	// failures counts every failure recorded (may be nil).
	failures interface{ Inc() }

	nDown atomic.Int64 // len(down), read without the lock by ok
	mu    sync.Mutex
	down  map[string]*peerOutage // node id → its current outage
}

// peerOutage is a run of failures of one peer.
type peerOutage struct {
	addr     string
	since    time.Time
	failures int
	lastErr  error
}

func newPeerFailures(log *slog.Logger, now func() time.Time, failures interface{ Inc() }) *peerFailures {
	return &peerFailures{log: log, now: now, failures: failures, down: make(map[string]*peerOutage)}
}

// failed records a failed exchange with peer m.
func (t *peerFailures) failed(m ring.Member, err error) {
	if t.failures != nil {
		t.failures.Inc()
	}
	t.mu.Lock()
	o := t.down[m.ID]
	first := o == nil
	if first {
		o = &peerOutage{addr: m.Addr, since: t.now()}
		t.down[m.ID] = o
		t.nDown.Store(int64(len(t.down)))
	}
	o.failures++
	o.lastErr = err
	t.mu.Unlock()
	if first {
		t.log.Warn("peer unreachable", "peer", m.ID, "addr", m.Addr, "err", err)
	}
}

// ok records a successful exchange with peer m.
func (t *peerFailures) ok(m ring.Member) {
	if t.nDown.Load() == 0 {
		return
	}
	t.mu.Lock()
	o := t.down[m.ID]
	delete(t.down, m.ID)
	t.nDown.Store(int64(len(t.down)))
	t.mu.Unlock()
	if o != nil {
		t.log.Info("peer reachable again", "peer", m.ID, "addr", m.Addr, "failures", o.failures,
			"duration", t.now().Sub(o.since).Round(time.Millisecond), "last_err", o.lastErr)
	}
}

// keep forgets the outages of peers that are no longer ring members
// (their id not in live), logging each once.
func (t *peerFailures) keep(live map[string]bool) {
	if t.nDown.Load() == 0 {
		return
	}
	type gone struct {
		id string
		o  *peerOutage
	}
	var forgotten []gone
	t.mu.Lock()
	for id, o := range t.down {
		if !live[id] {
			forgotten = append(forgotten, gone{id, o})
			delete(t.down, id)
		}
	}
	t.nDown.Store(int64(len(t.down)))
	t.mu.Unlock()
	for _, g := range forgotten {
		t.log.Info("unreachable peer left the ring", "peer", g.id, "addr", g.o.addr, "failures", g.o.failures,
			"duration", t.now().Sub(g.o.since).Round(time.Millisecond), "last_err", g.o.lastErr)
	}
}

// unreachable returns how many peers are in an outage now.
func (t *peerFailures) unreachable() int { return int(t.nDown.Load()) }

// isDown reports whether the peer id is in an outage (its last call could
// not reach it). It does not block beyond a short lock.
func (t *peerFailures) isDown(id string) bool {
	if t.nDown.Load() == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, down := t.down[id]
	return down
}

// note records the outcome of an exchange with peer m made under ctx: nil is
// a success; an error that says the peer could not be reached or did not
// answer in time is a failure, unless ctx itself ended (the engine gave up:
// that says nothing about the peer). Other errors (bad input, a refusal) are
// answers, and leave the record as it is.
func (t *peerFailures) note(ctx context.Context, m ring.Member, err error) {
	switch {
	case err == nil:
		t.ok(m)
	case ctx.Err() == nil && transfer.Unreachable(err):
		t.failed(m, err)
	}
}
