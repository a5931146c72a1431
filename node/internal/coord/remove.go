package coord

import (
	"context"
	"errors"
	"fmt"
	"sync"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// Removal is what Remove did, per id of the request.
type Removal struct {
	// Removed: some member held the chunk and removed it.
	Removed []bool
	// Pinned: some member holds the chunk and could not remove it now (a
	// lookup lease pins it).
	Pinned []bool
}

// Remove deletes the chunks of ids of the namespace ref from every member
// of the ring (this node in process): a chunk may be held by its owners,
// by the members written in their stead, by spread copies and by a member
// still handing it off, and a delete must reach them all. Members that did
// not answer are an error wrapping ErrUnavailable that names them, beside
// what the others did. It is a client's explicit removal: chunks lookup
// leases pin are removed too (RemoveRequest.unpin); only members that
// predate that report them pinned. Blocks until every member answered or
// PeerTimeout.
func (c *Coordinator) Remove(ctx context.Context, ref *kvringv1.NamespaceRef, ids [][]byte) (Removal, error) {
	if _, _, err := c.reg.Resolve(ref); err != nil {
		return Removal{}, err
	}
	out := Removal{Removed: make([]bool, len(ids)), Pinned: make([]bool, len(ids))}
	var mu sync.Mutex
	err := c.everyMember(ctx, func(ctx context.Context, m ring.Member) error {
		removed, pinned, err := c.removeOn(ctx, m, &kvringv1.RemoveRequest{Caller: c.caller(), Namespace: ref, Ids: ids, Unpin: true})
		if err == nil && (len(removed) != len(ids) || len(pinned) != len(ids)) {
			err = fmt.Errorf("node %s answered for %d of %d ids", m.ID, len(removed), len(ids))
		}
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range ids {
			out.Removed[i] = out.Removed[i] || removed[i]
			out.Pinned[i] = out.Pinned[i] || pinned[i]
		}
		return nil
	})
	return out, err
}

// DropEverywhere drops the namespace of ref from every member of the ring
// (this node in process): its chunks and its registry record, as the admin
// API's drop-namespace does on one node. It returns the chunks removed.
func (c *Coordinator) DropEverywhere(ctx context.Context, ref *kvringv1.NamespaceRef) (uint64, error) {
	var (
		mu sync.Mutex
		n  uint64
	)
	err := c.everyMember(ctx, func(ctx context.Context, m ring.Member) error {
		if m.ID == c.cfg.Self {
			freed, _, err := c.local.DropNamespace(ref)
			mu.Lock()
			n += uint64(freed.Chunks)
			mu.Unlock()
			return err
		}
		pc, err := c.peer(m)
		if err != nil {
			return err
		}
		resp, err := pc.Remove(ctx, &kvringv1.RemoveRequest{Caller: c.caller(), Namespace: ref, DropNamespace: true})
		c.peers.note(ctx, m, err)
		if err != nil {
			return transfer.FromStatus(err)
		}
		mu.Lock()
		n += resp.GetChunks()
		mu.Unlock()
		return nil
	})
	return n, err
}

// removeOn asks member m (this node in process) to remove ids.
func (c *Coordinator) removeOn(ctx context.Context, m ring.Member, req *kvringv1.RemoveRequest) (removed, pinned []bool, err error) {
	if m.ID == c.cfg.Self {
		return c.local.Remove(req.GetNamespace(), req.GetIds(), req.GetUnpin())
	}
	pc, err := c.peer(m)
	if err != nil {
		return nil, nil, err
	}
	resp, err := pc.Remove(ctx, req)
	c.peers.note(ctx, m, err)
	if err != nil {
		return nil, nil, transfer.FromStatus(err)
	}
	return resp.GetRemoved(), resp.GetPinned(), nil
}

// everyMember runs f for every member of the ring in parallel, each
// bounded by PeerTimeout, and joins the errors of the members that failed
// into one wrapping ErrUnavailable.
func (c *Coordinator) everyMember(ctx context.Context, f func(context.Context, ring.Member) error) error {
	rg, err := c.currentRing()
	if err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, m := range rg.Members() {
		wg.Go(func() {
			pctx, cancel := c.peerCtx(ctx)
			defer cancel()
			if err := f(pctx, m); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("node %s: %w", m.ID, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", transfer.ErrUnavailable, errors.Join(errs...))
	}
	return nil
}

// ListKeys asks member m (this node in process) for a page of the names of
// the chunks it holds (owner.ListKeys), bounded by PeerTimeout.
func (c *Coordinator) ListKeys(ctx context.Context, m ring.Member, prefix string, from []byte, count int) (names [][]byte, next []byte, err error) {
	if m.ID == c.cfg.Self {
		return c.local.ListKeys(prefix, from, count)
	}
	pc, err := c.peer(m)
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := c.peerCtx(ctx)
	defer cancel()
	resp, err := pc.ListKeys(pctx, &kvringv1.ListKeysRequest{Caller: c.caller(), NamespacePrefix: prefix, From: from, Count: uint32(count)})
	c.peers.note(ctx, m, err)
	if err != nil {
		return nil, nil, transfer.FromStatus(err)
	}
	return resp.GetNames(), resp.GetNext(), nil
}
