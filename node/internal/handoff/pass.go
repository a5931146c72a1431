package handoff

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/spread"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// item is one chunk this node holds whose owners a pass checks.
type item struct {
	rec    *kvringv1.NamespaceRecord
	h      store.HeldChunk
	owners []ring.Member
	// until is, per owner, until when its holding the chunk is confirmed
	// (zero: not confirmed; see Eviction safety).
	until   []time.Time
	leaving bool // this node is none of its owners
	// foreign: this node is none of the ring owners of part (readers ask
	// it only when its summary names part).
	foreign bool
	part    int
	settled bool // a batch decided its fate
}

// target is one member and the chunks it should hold.
type target struct {
	m      ring.Member
	items  []*item
	slot   []int // per item: the member's position in item.owners
	pinned bool  // Has pinned chunks there under the batch's lease
}

// Pass runs one hand-off pass now (waiting for one in progress) and returns
// its statistics.
func (m *Mover) Pass(ctx context.Context) PassStats {
	m.passMu.Lock()
	defer m.passMu.Unlock()
	m.setRunning(true)
	st := PassStats{Started: m.cfg.Now()}
	items, rg, held, stopped := m.plan(ctx, &st)
	if stopped || ctx.Err() != nil {
		// Stopped while planning (the node closes, or a drain ran out of
		// time): every chunk stays where it is, pending.
		st.Pending, st.Ended = len(held), m.cfg.Now()
		m.finish(st)
		return st
	}
	m.forgetListed(held) // the plan decided where each listed chunk is
	// Readers must know this node hands off before it evicts anything, not
	// before it copies: the gossip broadcast (which waits for a peer's ack)
	// runs while the first batch copies, and every settle waits for it.
	if rg != nil && rg.Len() > 0 {
		m.planned(rg, foreignParts(items, false, nil), st.Started)
	}
	announced := make(chan struct{})
	go func() {
		defer close(announced)
		m.publish(ctx)
	}()
	defer func() { <-announced }()
	m.batches(ctx, items, announced, &st)
	if ctx.Err() != nil { // stopped early (a drain ran out of time): what was not reached stays here
		for _, it := range items {
			if it.leaving && m.cfg.Store.Contains(it.h.Namespace, it.h.ID) && !it.settled {
				st.Pending++
			}
		}
	}
	slices.Sort(st.Unreachable)
	if rg != nil {
		st.Epoch = rg.Epoch()
	}
	st.Ended = m.cfg.Now()
	<-announced
	if rg != nil && rg.Len() > 0 {
		m.planned(rg, foreignParts(items, true, m.cfg.Store), st.Started) // what the pass could not hand off
		m.publish(ctx)
	}
	m.finish(st)
	return st
}

// plan lists the chunks whose owners the pass checks (and returns the
// chunks held): those held here but
// owned elsewhere, and those owned here with other owners too. When ctx
// ends meanwhile it stops, returns no items and reports stopped (planning a
// million chunks takes seconds, and Close waits for the pass).
func (m *Mover) plan(ctx context.Context, st *PassStats) (items []*item, rg *ring.Ring, held []store.HeldChunk, stopped bool) {
	rg = m.cfg.Ring()
	held = m.cfg.Store.Held()
	st.Held = len(held)
	if ctx.Err() != nil {
		return nil, rg, held, true
	}
	// One namespace after another, so that Has and Copy batches fill up.
	slices.SortFunc(held, func(a, b store.HeldChunk) int { return strings.Compare(a.Namespace, b.Namespace) })
	if rg == nil || rg.Len() == 0 {
		return nil, rg, held, false
	}
	recs := map[string]*kvringv1.NamespaceRecord{}
	for _, rec := range m.cfg.Registry.List() {
		recs[namespace.StoreName(rec.GetName(), rec.GetFingerprint())] = rec
	}
	for i, h := range held {
		if i%4096 == 4095 && ctx.Err() != nil {
			return nil, rg, held, true
		}
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
		if self < 0 && m.keepsSpread(rg, rec, h) {
			st.SpreadKept++
			continue // a spread copy of a hot group: it stays while the group is spread
		}
		it := &item{rec: rec, h: h, owners: owners, until: make([]time.Time, len(owners)), leaving: self < 0,
			part: rg.Partition(rec.GetName(), h.Place[:])}
		it.foreign = self < 0 && !owns(rg, it.part, replicas(rec), m.cfg.Self)
		if self >= 0 {
			it.until[self] = forever
		} else {
			st.Misplaced++
		}
		items = append(items, it)
	}
	return items, rg, held, false
}

// foreignParts lists the partitions of the foreign items; with held, only
// of those st still holds.
func foreignParts(items []*item, held bool, st Store) []int {
	var parts []int
	for _, it := range items {
		if it.foreign && (!held || st.Contains(it.h.Namespace, it.h.ID)) {
			parts = append(parts, it.part)
		}
	}
	return parts
}

// keepsSpread reports whether h is a spread copy this node keeps now: its
// group is spread (Config.Spread holds a live record) to a set of members
// this node belongs to on rg.
func (m *Mover) keepsSpread(rg *ring.Ring, rec *kvringv1.NamespaceRecord, h store.HeldChunk) bool {
	if m.cfg.Spread == nil || !h.Keyed {
		return false
	}
	k := spread.Key{NS: h.Namespace, Place: h.Place}
	width := m.cfg.Spread.Width(k)
	if width <= 1 || !m.cfg.Spread.Holds(k) {
		return false
	}
	return slices.ContainsFunc(rg.SpreadSet(rec.GetName(), h.Place[:], width),
		func(o ring.Member) bool { return o.ID == m.cfg.Self })
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
