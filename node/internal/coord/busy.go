package coord

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// stagingOn asks owner m which of ids it holds and, for the others, whether
// a write of them is staged there now; staging is nil when m does not say.
// Bounded by peerTimeout; the request may share a call with concurrent ones
// to m (hasCoalescer).
func (c *Coordinator) stagingOn(ctx context.Context, m ring.Member, ref *kvringv1.NamespaceRef, ids [][]byte) (held, staging []bool, err error) {
	if m.ID == c.cfg.Self {
		held, _, err := c.local.Has("", ref, ids, nil)
		if err != nil {
			return nil, nil, err
		}
		return held, c.local.Staging(ref, ids, held), nil
	}
	pc, err := c.peer(m)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.has.has(ctx, m.Addr, pc.Has, &kvringv1.HasRequest{Caller: c.caller(), Namespace: ref, Ids: ids, ReportStaging: true})
	c.peers.note(ctx, m, err)
	if err != nil {
		return nil, nil, transfer.FromStatus(err)
	}
	if len(resp.GetHeld()) != len(ids) {
		return nil, nil, fmt.Errorf("node %s answered %d of %d ids", m.ID, len(resp.GetHeld()), len(ids))
	}
	if len(resp.GetStaging()) != len(ids) {
		return resp.GetHeld(), nil, nil
	}
	return resp.GetHeld(), resp.GetStaging(), nil
}

// isBusy reports whether an owner's vote says another writer is staging the
// chunk right now.
func isBusy(v *kvringv1.ChunkVote) bool {
	return v.GetVote() == kvringv1.Vote_VOTE_FAILED && transfer.CodeIs(v.GetCode(), store.ErrBusy)
}

// awaitOtherWriters resolves busy votes: an owner that was staging a chunk
// for another writer when this put asked is polled (Has, without pins,
// reporting staging) until the chunk is held there, which turns the vote
// into already held; until the other write ended without sealing it
// (rejected by the owner's admission policy, aborted, its engine gone),
// which fails the vote at once with a reason that says so; or until
// CommitTimeout or ctx ends, which fails it too. An owner that does not
// report staging (older version) is waited for until the bound. It runs
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
			held, staging, err := c.stagingOn(ctx, p.member, ref, ids)
			if err != nil {
				continue // the owner may answer the next time; ctx bounds the wait
			}
			still := pending[:0]
			for k, li := range pending {
				switch {
				case held[k]:
					p.votes[li] = &kvringv1.ChunkVote{Index: li, Vote: kvringv1.Vote_VOTE_ALREADY_HELD}
				case staging != nil && !staging[k]:
					p.votes[li] = &kvringv1.ChunkVote{Index: li, Vote: kvringv1.Vote_VOTE_FAILED, Code: transfer.WireCode(store.ErrBusy),
						Reason: "another write of this chunk ended without storing it (declined or aborted); retry"}
				default:
					still = append(still, li)
				}
			}
			pending = still
		}
	})
}
