package spread

import (
	"sync"
	"time"

	"github.com/kvring/kvring/store"
)

// Key names a placement group: the store name of its namespace
// (namespace.StoreName) and the group's key.
type Key struct {
	NS    string
	Place store.ID
}

// record is what a Table knows of one group.
type record struct {
	width     int
	holdUntil time.Time // this node keeps spread copies until then (zero: it does not)
	hintUntil time.Time // a holder reported the width; believed until then
}

// DefaultMaxRecords is TableConfig.MaxRecords' default.
const DefaultMaxRecords = 1 << 16

// TableConfig configures a Table.
type TableConfig struct {
	// Now is the clock records end on. Default time.Now.
	Now func() time.Time
	// MaxRecords bounds the records kept (about 100 bytes each); when full,
	// ended records are dropped first, then new hints are not kept. Default
	// DefaultMaxRecords.
	MaxRecords int
}

// Table is what this node knows of spread groups: the groups it keeps
// spread copies of (Hold) and the groups holders reported spread (Hint).
// Safe for concurrent use; no method blocks beyond one map operation
// (Hold and Hint sweep ended records when the table is full).
type Table struct {
	cfg TableConfig
	mu  sync.Mutex
	m   map[Key]record
}

// NewTable returns an empty Table.
func NewTable(cfg TableConfig) *Table {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = DefaultMaxRecords
	}
	return &Table{cfg: cfg, m: make(map[Key]record)}
}

// Hold records that this node keeps spread copies of group k, spread to
// width members, until until (a later Hold extends it, never shortens it).
// A Hold is kept even when the table is full.
func (t *Table) Hold(k Key, width int, until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.m[k]
	if !ok && len(t.m) >= t.cfg.MaxRecords {
		t.sweepLocked(t.cfg.Now())
	}
	r.width = width
	if until.After(r.holdUntil) {
		r.holdUntil = until
	}
	t.m[k] = r
}

// Hint records that a holder of group k reported it spread to width
// members (0 or 1: not spread), believed until until. While this node
// keeps copies of k (Hold) a hint does not narrow the width its Hold
// recorded: the hand-off keeps those copies by it (a member that lost its
// copies, or never got them, may report the group not spread).
func (t *Table) Hint(k Key, width int, until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.m[k]
	if !ok {
		if width <= 1 {
			return
		}
		if len(t.m) >= t.cfg.MaxRecords {
			t.sweepLocked(t.cfg.Now())
			if len(t.m) >= t.cfg.MaxRecords {
				return
			}
		}
	}
	if width <= 1 && r.holdUntil.IsZero() {
		delete(t.m, k) // the group cooled down
		return
	}
	if t.cfg.Now().Before(r.holdUntil) {
		width = max(width, r.width)
	}
	r.width, r.hintUntil = width, until
	t.m[k] = r
}

// Width returns how many members of k's ring order keep copies of group
// k, as far as this node knows now; 0 when it knows of none.
func (t *Table) Width(k Key) int {
	if t == nil {
		return 0
	}
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.m[k]
	if !ok || (!now.Before(r.holdUntil) && !now.Before(r.hintUntil)) {
		return 0
	}
	return r.width
}

// Holds reports whether this node keeps spread copies of group k now.
func (t *Table) Holds(k Key) bool {
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.m[k]
	return ok && now.Before(r.holdUntil)
}

// Holding counts the groups this node keeps spread copies of now.
func (t *Table) Holding() int {
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, r := range t.m {
		if now.Before(r.holdUntil) {
			n++
		}
	}
	return n
}

// Sweep drops the records that have ended. The node's maintenance loop
// calls it.
func (t *Table) Sweep() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked(t.cfg.Now())
}

func (t *Table) sweepLocked(now time.Time) {
	for k, r := range t.m {
		if !now.Before(r.holdUntil) && !now.Before(r.hintUntil) {
			delete(t.m, k)
		}
	}
}
