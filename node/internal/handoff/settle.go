package handoff

import (
	"context"
	"errors"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// Eviction safety. Two nodes whose ring views disagree can each hold a
// chunk the other thinks it owns; if each evicted its copy after seeing the
// other's, the chunk would be lost. So a holding is confirmed only (a) by
// a copy this pass sealed there, or (b) by Has with a pin under the batch's
// lease, which keeps that copy from being evicted until the batch unpins it,
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

// unpin releases a batch's pins, after its evictions.
func (m *Mover) unpin(ts []*target, lease uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, t := range ts {
		if t.pinned {
			m.cfg.Peers.Unpin(ctx, t.m, []uint64{lease})
		}
	}
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
