package handoff

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/kvring/kvring/node/internal/moves"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// Mover runs the hand-off passes of one node (see the package doc). Create
// with New, then Start; Close stops it and waits for its goroutine. Safe
// for concurrent use.
type Mover struct {
	cfg  Config
	pace pacer
	kick chan struct{} // cap 1: a pass is wanted
	stop context.CancelFunc
	wg   sync.WaitGroup

	passMu sync.Mutex // one pass at a time (the loop's, or Drain's)

	// The hand-off summary (summary.go): sum is guarded by sumMu; pub (cap
	// 1) asks the publish goroutine to gossip it; published is what was
	// last gossiped, guarded by pubMu.
	sumMu     sync.Mutex
	sum       summaryState
	pub       chan struct{}
	pubMu     sync.Mutex
	published *moves.Summary

	mu     sync.Mutex
	status Status
}

// New returns a Mover; it does nothing until Start.
func New(cfg Config) *Mover {
	cfg.setDefaults()
	return &Mover{cfg: cfg, kick: make(chan struct{}, 1), pub: make(chan struct{}, 1),
		sum:  summaryState{recent: map[placedKey]*placed{}},
		pace: pacer{rate: cfg.Rate, now: cfg.Now, sleep: cfg.Sleep}}
}

// Start runs the pass loop, and the goroutine that gossips the hand-off
// summary when a write changes it, in goroutines that Close waits for. The
// first pass runs at once: a restarted node may hold chunks that belong
// elsewhere.
func (m *Mover) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	m.wg.Add(2)
	go m.loop(ctx)
	go m.publishLoop(ctx)
	m.Kick()
}

// Kick asks for a pass soon: the ring changed, this node started or stopped
// draining. It never blocks.
func (m *Mover) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Close stops the loop (a pass in progress ends at its next copy) and
// waits for it. Idempotent.
func (m *Mover) Close() {
	if m.stop != nil {
		m.stop()
	}
	m.wg.Wait()
}

// loop runs a pass when kicked, after a pass that left work undone at
// once more (retryAfter), and every Sweep otherwise.
func (m *Mover) loop(ctx context.Context) {
	defer m.wg.Done()
	wait := m.cfg.Sweep
	stuck := 0 // passes in a row that left work undone and did none
	for {
		var timer <-chan time.Time
		var t *time.Timer
		if wait > 0 {
			t = time.NewTimer(wait)
			timer = t.C
		}
		kicked := false
		select {
		case <-ctx.Done():
		case <-m.kick:
			kicked = true
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		if kicked {
			m.quiet(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if kicked {
			stuck = 0 // the ring or this node's state changed: a pass may get further now
		}
		st := m.Pass(ctx)
		wait, stuck = m.retryAfter(st, stuck)
	}
}

// retryAfter is how long the loop waits after a pass with stats st, with
// stuck passes before it that left work undone and did none. A pass that
// left work undone runs again after Retry, and after twice as long each
// time it got nowhere (nothing copied, nothing evicted), up to Sweep (16
// Retry without one): an owner that stays unreachable, or chunks pinned
// on it, are asked about again, but a cluster whose members time out under
// load is not asked about every chunk every Retry by every member, which
// would add the load that makes them time out. Progress and ring changes
// (kicks) start over.
func (m *Mover) retryAfter(st PassStats, stuck int) (time.Duration, int) {
	if !st.undone() {
		return m.cfg.Sweep, 0
	}
	if st.Copied > 0 || st.Evicted > 0 {
		return m.cfg.Retry, 0
	}
	most := 16 * m.cfg.Retry // with no Sweep
	if m.cfg.Sweep > 0 {
		most = max(m.cfg.Sweep, m.cfg.Retry)
	}
	return min(m.cfg.Retry<<min(stuck, 16), most), stuck + 1
}

// quiet waits until no kick has come for Config.Quiet, at most 5 Quiet in
// all: ring changes come in bursts (a node that starts sees its peers one
// by one), and a pass on a ring that is still forming moves chunks twice.
func (m *Mover) quiet(ctx context.Context) {
	if m.cfg.Quiet <= 0 {
		return
	}
	end := time.NewTimer(5 * m.cfg.Quiet)
	defer end.Stop()
	for {
		t := time.NewTimer(m.cfg.Quiet)
		select {
		case <-m.kick:
			t.Stop()
			continue
		case <-t.C:
		case <-end.C:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
		}
		return
	}
}

// Drain runs passes until no chunk this node holds belongs on another node
// (it drains: every chunk does), no member is left to take them, or ctx
// ends. It returns the last pass's statistics with Copied, CopiedBytes,
// Evicted and FailedCopies summed over the passes: Pending counts what
// could not be handed off.
func (m *Mover) Drain(ctx context.Context) PassStats {
	if st, ok := m.drainAlone(); ok {
		return st
	}
	var moved PassStats
	for {
		st := m.Pass(ctx)
		moved.add(st)
		st.Copied, st.CopiedBytes, st.FailedCopies, st.Evicted, st.Errors = moved.Copied, moved.CopiedBytes, moved.FailedCopies, moved.Evicted, moved.Errors
		if st.Pending == st.NoOwner || ctx.Err() != nil {
			return st
		}
		if m.cfg.Sleep(ctx, min(m.cfg.Retry, time.Second)) != nil {
			return st
		}
	}
}

// Status returns the totals and the last pass's statistics.
func (m *Mover) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.status
	s.Last.Errors = append([]string(nil), s.Last.Errors...)
	return s
}

// drainAlone ends the drain of a node that is the only member of its ring:
// no chunk has anywhere to go, and a pass would plan and announce every
// chunk to find that out (20 s for a million chunks). It records and returns
// what such a pass ends with: every held chunk pending, none with an owner
// (an upper bound: see EachHeld).
// false when another member is on the ring.
func (m *Mover) drainAlone() (PassStats, bool) {
	if rg := m.cfg.Ring(); rg != nil && slices.ContainsFunc(rg.Members(), func(o ring.Member) bool { return o.ID != m.cfg.Self }) {
		return PassStats{}, false
	}
	// Counted without Held's copy (a second for a million chunks); a chunk
	// both in memory and on disk counts twice. A pass running meanwhile is
	// not waited for: alone, it moves nothing.
	n := 0
	m.cfg.Store.EachHeld(func(store.HeldChunk) { n++ })

	st := PassStats{Started: m.cfg.Now(), Held: n, Pending: n, NoOwner: n}
	st.Ended = m.cfg.Now()
	m.finish(st)
	return st, true
}
