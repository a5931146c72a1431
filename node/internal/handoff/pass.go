package handoff

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// maxCopyBytes bounds the bytes of one Copy call, so pacing stays smooth
// and a failed call wastes little; maxBatchBytes bounds a batch, and so
// the bytes its pins hold on every owner at once (a small node's pin limit
// is half its memory: pins must leave room for the engines' own).
const (
	maxCopyBytes  = 16 << 20
	maxBatchBytes = 16 << 20
)

// chunkCost is what a copy costs per chunk besides its bytes, as the pacer
// counts it: staging, a frame, a vote and a seal cost about as much CPU as
// moving 32 KiB, so small chunks are paced by their number (at the default
// 256 MiB/s, at most about 8,000 chunks a second) and large ones by their
// bytes.
const chunkCost = 32 << 10

// Eviction safety. Two nodes whose ring views disagree can each hold a
// chunk the other thinks it owns; if each evicted its copy after seeing the
// other's, the chunk would be lost. So a holding is confirmed only (a) by
// a copy this pass sealed there, or (b) by Has with a pin under the pass's
// lease, which keeps that copy from being evicted until the pass unpins it,
// after its own evictions. Of two such nodes, the one that settles first
// finds its copy pinned by the other and keeps it.

// pinFor is the pin a pass asks for on the holders it confirms; the owner
// may grant less. A confirmation is used only while its pin lasts, with
// pinMargin to spare.
const (
	pinFor    = 2 * time.Minute
	pinMargin = 5 * time.Second
)

// forever marks a holding that needs no pin (this node's, or sealed by this
// pass's copy).
var forever = time.Unix(1<<62, 0)

// item is one chunk this node holds whose owners a pass checks.
type item struct {
	rec    *kvringv1.NamespaceRecord
	h      store.HeldChunk
	owners []ring.Member
	// until is, per owner, until when its holding the chunk is confirmed
	// (zero: not confirmed; see Eviction safety).
	until   []time.Time
	leaving bool // this node is none of its owners
	settled bool // a batch decided its fate
}

// target is one member and the chunks it should hold.
type target struct {
	m      ring.Member
	items  []*item
	slot   []int // per item: the member's position in item.owners
	pinned bool  // Has pinned chunks there under the pass's lease
}

// Pass runs one hand-off pass now (waiting for one in progress) and returns
// its statistics.
func (m *Mover) Pass(ctx context.Context) PassStats {
	m.passMu.Lock()
	defer m.passMu.Unlock()
	m.setRunning(true)
	st := PassStats{Started: m.cfg.Now()}
	items, rg := m.plan(&st)
	// Readers must know this node hands off before it evicts anything, not
	// before it copies: the gossip broadcast (which waits for a peer's ack)
	// runs while the first batch copies, and every settle waits for it.
	announced, misplaced := make(chan struct{}), st.Misplaced > 0
	go func() {
		defer close(announced)
		if misplaced {
			m.announce(ctx, true)
		}
	}()
	defer func() { <-announced }()
	down := map[string]bool{} // members this pass could not ask: not asked again
	for lo := 0; lo < len(items) && ctx.Err() == nil; {
		hi, bytes := lo+1, items[lo].h.Size
		for hi < len(items) && hi-lo < m.cfg.Batch && items[hi].rec == items[lo].rec && bytes+items[hi].h.Size <= maxBatchBytes {
			bytes += items[hi].h.Size
			hi++
		}
		m.batch(ctx, items[lo:hi], down, announced, &st)
		lo = hi
	}
	if ctx.Err() != nil { // stopped early (a drain ran out of time): what was not reached stays here
		for _, it := range items {
			if it.leaving && m.cfg.Store.Contains(it.h.Namespace, it.h.ID) && !it.settled {
				st.Pending++
			}
		}
	}
	for id := range down {
		st.Unreachable = append(st.Unreachable, id)
	}
	slices.Sort(st.Unreachable)
	if rg != nil {
		st.Epoch = rg.Epoch()
	}
	st.Ended = m.cfg.Now()
	<-announced
	if st.Pending == 0 {
		m.announce(ctx, false)
	}
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
		it := &item{rec: rec, h: h, owners: owners, until: make([]time.Time, len(owners)), leaving: self < 0}
		if self >= 0 {
			it.until[self] = forever
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

// batch confirms or copies a batch of items (one namespace) on every
// owner, evicts what every owner now holds, and releases the pins it took:
// pins last one batch, so a hand-off never pins more than a batch's bytes.
func (m *Mover) batch(ctx context.Context, items []*item, down map[string]bool, announced <-chan struct{}, st *PassStats) {
	lease := &kvringv1.LeasePin{LeaseId: owner.NewLeaseID(), TtlMs: uint32(pinFor / time.Millisecond)}
	ts := targets(items, m.cfg.Self)
	// The members are served at once: each target writes only its own
	// slots of the items' until and its own statistics.
	stats := make([]PassStats, len(ts))
	ok := make([]bool, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		if down[t.m.ID] || ctx.Err() != nil {
			ok[i] = true // not asked: not newly down
			continue
		}
		wg.Go(func() { ok[i] = m.serveTarget(ctx, t, lease, &stats[i]) })
	}
	wg.Wait()
	for i, t := range ts {
		if !ok[i] {
			down[t.m.ID] = true
		}
		st.add(stats[i])
	}
	<-announced
	m.settle(items, st)
	m.unpin(ts, lease.GetLeaseId())
}

// serveTarget asks t's member which of its chunks it holds, pinning them,
// and copies it the others. It returns false when the member could not be
// asked.
func (m *Mover) serveTarget(ctx context.Context, t *target, lease *kvringv1.LeasePin, st *PassStats) bool {
	rec := t.items[0].rec
	ids := make([][]byte, 0, len(t.items))
	for _, it := range t.items {
		ids = append(ids, it.h.ID[:])
	}
	asked := m.cfg.Now()
	has, ttl, err := m.cfg.Peers.Has(ctx, t.m, rec, ids, lease)
	if err != nil {
		st.noteError(err)
		return false
	}
	t.pinned = ttl > 0
	var missing []int
	for j, ok := range has {
		if ok {
			t.items[j].until[t.slot[j]] = asked.Add(ttl)
		} else {
			missing = append(missing, j)
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
		if err := m.pace.wait(ctx, bytes+int64(len(batch))*chunkCost); err != nil {
			release(batch)
			return
		}
		errs := m.cfg.Peers.Copy(ctx, t.m, rec, batch)
		release(batch)
		for j, err := range errs {
			p := pos[j]
			if errors.Is(err, store.ErrAlreadyHeld) {
				continue // held there since Has asked: the next pass confirms it with a pin
			}
			if err != nil {
				st.FailedCopies++
				st.noteError(err)
				continue
			}
			t.items[p].until[t.slot[p]] = forever
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

// settle evicts the misplaced chunks every owner is confirmed to hold and
// counts what is left.
func (m *Mover) settle(items []*item, st *PassStats) {
	safe := m.cfg.Now().Add(pinMargin)
	for _, it := range items {
		it.settled = true
		n := 0
		for _, u := range it.until {
			if u.After(safe) {
				n++
			}
		}
		switch {
		case it.leaving && len(it.owners) > 0 && n == len(it.owners):
			switch err := m.cfg.Store.Evict(it.h.Namespace, it.h.ID); {
			case err == nil:
				st.Evicted++
			case errors.Is(err, store.ErrBusy): // pinned by a lookup lease, or by another node's hand-off
				st.Pending++
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

// unpin releases the pass's pins, after its evictions.
func (m *Mover) unpin(ts []*target, lease uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, t := range ts {
		if t.pinned {
			m.cfg.Peers.Unpin(ctx, t.m, []uint64{lease})
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
