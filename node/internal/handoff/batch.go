package handoff

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/kvring/kvring/node/internal/chunkcopy"
	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// maxCopyBytes bounds the bytes of one Copy call, so pacing stays smooth
// and a failed call wastes little; maxBatchBytes bounds a batch, and with
// batchWorkers the bytes a pass's pins hold on an owner at once (16 MiB: a
// small node's pin limit is half its memory, and pins must leave room for
// the engines' own).
const (
	maxCopyBytes  = 8 << 20
	maxBatchBytes = 8 << 20
	batchWorkers  = 2
)

// chunkCost is what a copy costs per chunk besides its bytes, as the pacer
// counts it: staging, a frame, a vote and a seal cost about as much CPU as
// moving 32 KiB, so small chunks are paced by their number (at the default
// 256 MiB/s, at most about 8,000 chunks a second) and large ones by their
// bytes.
const chunkCost = 32 << 10

// batches cuts the items into batches of one namespace (at most Batch
// chunks and maxBatchBytes) and runs them, batchWorkers at a time: one
// batch's copy overlaps the next one's Has and the settling of another.
// Members that could not be asked are not asked again in this pass.
func (m *Mover) batches(ctx context.Context, items []*item, announced <-chan struct{}, st *PassStats) {
	var (
		mu   sync.Mutex
		down = map[string]bool{}
		work = make(chan []*item)
		wg   sync.WaitGroup
	)
	isDown := func(id string) bool { mu.Lock(); defer mu.Unlock(); return down[id] }
	for range batchWorkers {
		wg.Go(func() {
			for b := range work {
				part, lost := m.batch(ctx, b, isDown, announced)
				mu.Lock()
				st.merge(part)
				for _, id := range lost {
					if !down[id] {
						down[id] = true
						st.Unreachable = append(st.Unreachable, id)
					}
				}
				mu.Unlock()
			}
		})
	}
	for lo := 0; lo < len(items) && ctx.Err() == nil; {
		hi, bytes := lo+1, items[lo].h.Size
		for hi < len(items) && hi-lo < m.cfg.Batch && items[hi].rec == items[lo].rec && bytes+items[hi].h.Size <= maxBatchBytes {
			bytes += items[hi].h.Size
			hi++
		}
		work <- items[lo:hi]
		lo = hi
	}
	close(work)
	wg.Wait()
}

// batch confirms or copies a batch of items (one namespace) on every
// owner, evicts what every owner now holds, and releases the pins it took:
// pins last one batch, so a hand-off never pins more than batchWorkers
// batches' bytes. It returns the batch's statistics and the members it
// could not ask.
func (m *Mover) batch(ctx context.Context, items []*item, isDown func(string) bool, announced <-chan struct{}) (st PassStats, lost []string) {
	lease := &kvringv1.LeasePin{LeaseId: owner.NewLeaseID(), TtlMs: uint32(pinFor / time.Millisecond)}
	ts := targets(items, m.cfg.Self)
	// The members are served at once: each target writes only its own
	// slots of the items' until and its own statistics.
	stats := make([]PassStats, len(ts))
	ok := make([]bool, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		if isDown(t.m.ID) || ctx.Err() != nil {
			ok[i] = true // not asked: not newly down
			continue
		}
		wg.Go(func() { ok[i] = m.serveTarget(ctx, t, lease, &stats[i]) })
	}
	wg.Wait()
	for i, t := range ts {
		if !ok[i] {
			lost = append(lost, t.m.ID)
		}
		st.add(stats[i])
	}
	<-announced
	m.settle(items, &st)
	m.unpin(ts, lease.GetLeaseId())
	return st, lost
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
		var batch []chunkcopy.Chunk
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
			batch = append(batch, chunkcopy.Chunk{View: v, ID: it.h.ID, Place: it.h.Place})
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
		errs := m.cfg.Peers.Copy(ctx, t.m, rec, batch, chunkcopy.Spread{})
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

func release(batch []chunkcopy.Chunk) {
	for _, c := range batch {
		c.View.Release()
	}
}
