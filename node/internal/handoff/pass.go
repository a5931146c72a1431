package handoff

import (
	"context"
	"slices"
	"strings"

	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// maxCopyBytes bounds the bytes of one Copy call, so pacing stays smooth
// and a failed call wastes little.
const maxCopyBytes = 32 << 20

// item is one chunk this node holds whose owners a pass checks.
type item struct {
	rec     *kvringv1.NamespaceRecord
	h       store.HeldChunk
	owners  []ring.Member
	holds   []bool // per owner: holds it sealed (this node: true)
	leaving bool   // this node is none of its owners
}

// target is one member and the chunks it should hold.
type target struct {
	m     ring.Member
	items []*item
	slot  []int // per item: the member's position in item.owners
}

// Pass runs one hand-off pass now (waiting for one in progress) and returns
// its statistics.
func (m *Mover) Pass(ctx context.Context) PassStats {
	m.passMu.Lock()
	defer m.passMu.Unlock()
	m.setRunning(true)
	st := PassStats{Started: m.cfg.Now()}
	items, rg := m.plan(&st)
	if st.Misplaced > 0 {
		m.announce(ctx, true)
	}
	for _, t := range targets(items, m.cfg.Self) {
		if ctx.Err() != nil {
			break
		}
		m.serve(ctx, t, &st)
	}
	m.settle(items, &st)
	if st.Pending == 0 {
		m.announce(ctx, false)
	}
	if rg != nil {
		st.Epoch = rg.Epoch()
	}
	st.Ended = m.cfg.Now()
	m.finish(st)
	return st
}

// plan lists the chunks whose owners the pass checks: those held here but
// owned elsewhere, and those owned here with other owners too.
func (m *Mover) plan(st *PassStats) ([]*item, *ring.Ring) {
	rg := m.cfg.Ring()
	held := m.cfg.Store.Held()
	st.Held = len(held)
	// One namespace after another, so that Has and Copy batches fill up.
	slices.SortFunc(held, func(a, b store.HeldChunk) int { return strings.Compare(a.Namespace, b.Namespace) })
	if rg == nil || rg.Len() == 0 {
		return nil, rg
	}
	recs := map[string]*kvringv1.NamespaceRecord{}
	for _, rec := range m.cfg.Registry.List() {
		recs[namespace.StoreName(rec.GetName(), rec.GetFingerprint())] = rec
	}
	var items []*item
	for _, h := range held {
		rec := recs[h.Namespace]
		if rec == nil {
			continue // a namespace dropped meanwhile, or unknown here yet
		}
		if namespace.GroupSize(rec.GetSchema()) > 1 && !h.Keyed {
			st.UnknownPlacement++
			continue
		}
		owners := m.cfg.Owners(rg, rec.GetName(), h.Place[:], replicas(rec))
		self := slices.IndexFunc(owners, func(o ring.Member) bool { return o.ID == m.cfg.Self })
		if self >= 0 && len(owners) == 1 && replicas(rec) == 1 {
			continue // its only owner holds it
		}
		it := &item{rec: rec, h: h, owners: owners, holds: make([]bool, len(owners)), leaving: self < 0}
		if self >= 0 {
			it.holds[self] = true
		} else {
			st.Misplaced++
		}
		items = append(items, it)
	}
	return items, rg
}

// targets groups the items by the other members that should hold them, in
// member order.
func targets(items []*item, self string) []*target {
	by := map[string]*target{}
	for _, it := range items {
		for k, o := range it.owners {
			if o.ID == self {
				continue
			}
			t := by[o.ID]
			if t == nil {
				t = &target{m: o}
				by[o.ID] = t
			}
			t.items = append(t.items, it)
			t.slot = append(t.slot, k)
		}
	}
	out := make([]*target, 0, len(by))
	for _, t := range by {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *target) int { return strings.Compare(a.m.ID, b.m.ID) })
	return out
}

// serve asks t's member which of its chunks it holds and copies it the
// others, one namespace and one batch at a time.
func (m *Mover) serve(ctx context.Context, t *target, st *PassStats) {
	for lo := 0; lo < len(t.items); {
		hi := lo + 1
		for hi < len(t.items) && hi-lo < m.cfg.Batch && t.items[hi].rec == t.items[lo].rec {
			hi++
		}
		if !m.serveBatch(ctx, t, lo, hi, st) {
			st.Unreachable = append(st.Unreachable, t.m.ID)
			return
		}
		lo = hi
	}
}

// serveBatch checks and copies t.items[lo:hi] (one namespace). It returns
// false when the member could not be asked.
func (m *Mover) serveBatch(ctx context.Context, t *target, lo, hi int, st *PassStats) bool {
	rec := t.items[lo].rec
	ids := make([][]byte, 0, hi-lo)
	for _, it := range t.items[lo:hi] {
		ids = append(ids, it.h.ID[:])
	}
	has, err := m.cfg.Peers.Has(ctx, t.m, rec, ids)
	if err != nil {
		st.noteError(err)
		return false
	}
	var missing []int
	for j, ok := range has {
		if ok {
			t.items[lo+j].holds[t.slot[lo+j]] = true
		} else {
			missing = append(missing, lo+j)
		}
	}
	m.copyTo(ctx, t, rec, missing, st)
	return true
}

// copyTo copies the chunks at positions idx of t.items to t's member, in
// calls of at most maxCopyBytes, paced.
func (m *Mover) copyTo(ctx context.Context, t *target, rec *kvringv1.NamespaceRecord, idx []int, st *PassStats) {
	for len(idx) > 0 && ctx.Err() == nil {
		var batch []coord.CopyChunk
		var pos []int
		var bytes int64
		for len(idx) > 0 && (len(batch) == 0 || bytes+t.items[idx[0]].h.Size <= maxCopyBytes) {
			p := idx[0]
			it := t.items[p]
			idx = idx[1:]
			v, err := m.cfg.Store.Get(it.h.Namespace, it.h.ID)
			if err != nil {
				continue // evicted or dropped since the listing: nothing to hand off
			}
			batch = append(batch, coord.CopyChunk{View: v, ID: it.h.ID, Place: it.h.Place})
			pos = append(pos, p)
			bytes += it.h.Size
		}
		if len(batch) == 0 {
			return
		}
		if err := m.pace.wait(ctx, bytes); err != nil {
			release(batch)
			return
		}
		errs := m.cfg.Peers.Copy(ctx, t.m, rec, batch)
		release(batch)
		for j, err := range errs {
			p := pos[j]
			if err != nil {
				st.FailedCopies++
				st.noteError(err)
				continue
			}
			t.items[p].holds[t.slot[p]] = true
			st.Copied++
			st.CopiedBytes += t.items[p].h.Size
		}
	}
}

func release(batch []coord.CopyChunk) {
	for _, c := range batch {
		c.View.Release()
	}
}

// settle evicts the misplaced chunks every owner now holds and counts what
// is left.
func (m *Mover) settle(items []*item, st *PassStats) {
	for _, it := range items {
		n := 0
		for _, h := range it.holds {
			if h {
				n++
			}
		}
		switch {
		case it.leaving && len(it.owners) > 0 && n == len(it.owners):
			if m.cfg.Store.Evict(it.h.Namespace, it.h.ID) == nil {
				st.Evicted++
			}
		case it.leaving:
			st.Pending++
			if len(it.owners) == 0 {
				st.NoOwner++
			}
		case n < replicas(it.rec):
			st.Underreplicated++
		}
	}
}

// announce gossips a change of "handing off".
func (m *Mover) announce(ctx context.Context, on bool) {
	if m.announced == on || m.cfg.Announce == nil {
		return
	}
	if err := m.cfg.Announce(ctx, on); err != nil {
		m.cfg.Log.Warn("cannot gossip the hand-off state", "handing_off", on, "err", err)
		return
	}
	m.announced = on
}

func (m *Mover) setRunning(on bool) {
	m.mu.Lock()
	m.status.Running = on
	m.mu.Unlock()
}

// finish records a pass and logs one that moved or left something.
func (m *Mover) finish(st PassStats) {
	m.mu.Lock()
	m.status.Running = false
	m.status.Passes++
	m.status.CopiedChunks += int64(st.Copied)
	m.status.CopiedBytes += st.CopiedBytes
	m.status.EvictedChunks += int64(st.Evicted)
	m.status.FailedCopies += int64(st.FailedCopies)
	m.status.Last = st
	m.mu.Unlock()
	if st.Copied > 0 || st.undone() || st.Evicted > 0 {
		m.cfg.Log.Info("hand-off pass", "held", st.Held, "misplaced", st.Misplaced, "copied", st.Copied,
			"copied_bytes", st.CopiedBytes, "evicted", st.Evicted, "failed", st.FailedCopies, "pending", st.Pending,
			"underreplicated", st.Underreplicated, "unreachable", st.Unreachable, "took", st.Ended.Sub(st.Started))
	}
}

// replicas is a namespace's replication factor (at least 1).
func replicas(rec *kvringv1.NamespaceRecord) int { return int(max(1, rec.GetReplicationFactor())) }
