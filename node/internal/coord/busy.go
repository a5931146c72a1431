package coord

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// isBusy reports whether an owner's vote says another writer is staging the
// chunk right now.
func isBusy(v *kvringv1.ChunkVote) bool {
	return v.GetVote() == kvringv1.Vote_VOTE_FAILED && transfer.CodeIs(v.GetCode(), store.ErrBusy)
}

// awaitOtherWriters resolves busy votes: an owner that was staging a chunk
// for another writer when this put asked is polled (Has, without pins) until
// the chunk is held there, which turns the vote into already held, or until
// CommitTimeout or ctx ends, which leaves it failed with a reason that says
// so. (The other write ends within its own call: sealed, or aborted when its
// engine goes away, after which this put's wait runs to its bound.) It runs
// after this put's own commits, so two puts waiting on each other's chunks
// cannot deadlock. Blocks up to CommitTimeout.
func (c *Coordinator) awaitOtherWriters(ctx context.Context, ref *kvringv1.NamespaceRef, shares map[string]*ownerShare) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	start := time.Now()
	var waited atomic.Bool // parallel runs one goroutine per owner
	defer func() {
		if waited.Load() {
			c.m.PutBusyWait.Observe(time.Since(start).Seconds())
		}
	}()
	parallel(shares, func(p *ownerShare) {
		if p.failed != nil {
			return
		}
		var pending []uint32
		for li, v := range p.votes {
			if isBusy(v) {
				pending = append(pending, li)
			}
		}
		if len(pending) > 0 {
			waited.Store(true)
		}
		for delay := 2 * time.Millisecond; len(pending) > 0; delay = min(2*delay, 100*time.Millisecond) {
			select {
			case <-ctx.Done():
				for _, li := range pending {
					p.votes[li] = &kvringv1.ChunkVote{Index: li, Vote: kvringv1.Vote_VOTE_FAILED, Code: transfer.WireCode(store.ErrBusy),
						Reason: fmt.Sprintf("another write of this chunk did not complete within %s; retry", time.Since(start).Round(time.Millisecond))}
				}
				return
			case <-time.After(delay):
			}
			ids := make([][]byte, len(pending))
			for k, li := range pending {
				ids[k] = p.chunks[li].GetId()
			}
			held, err := c.hasOn(ctx, p.member, ref, ids, nil)
			if err != nil {
				continue // the owner may answer the next time; ctx bounds the wait
			}
			still := pending[:0]
			for k, li := range pending {
				if held[k] {
					p.votes[li] = &kvringv1.ChunkVote{Index: li, Vote: kvringv1.Vote_VOTE_ALREADY_HELD}
				} else {
					still = append(still, li)
				}
			}
			pending = still
		}
	})
}
