package node

import (
	"context"
	"fmt"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// parseIDs checks a request's ids.
func parseIDs(raw [][]byte, maxBatch int) ([]store.ID, error) {
	if len(raw) > maxBatch {
		return nil, fmt.Errorf("%w: %d ids in one call, more than the limit %d", transfer.ErrInvalidArgument, len(raw), maxBatch)
	}
	ids := make([]store.ID, len(raw))
	for i, b := range raw {
		id, err := store.ParseID(b)
		if err != nil {
			return nil, fmt.Errorf("%w: ids[%d]: must be %d bytes, got %d", transfer.ErrInvalidArgument, i, store.IDSize, len(b))
		}
		ids[i] = id
	}
	return ids, nil
}

// lookupPlan is one node's share of a lookup.
type lookupPlan struct {
	m      ring.Member
	global []int
	ids    [][]byte
	held   []bool
	err    error
	pinned bool
}

// lookup answers how many leading ids are held now by a reachable owner,
// asking every owner of every id in parallel, one batch per node. With a pin
// TTL the holders pin them under one lease id. An owner that does not answer
// within the call's deadline counts as not holding anything.
func (c *coordinator) lookup(ctx context.Context, req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	_, rec, err := c.reg.resolve(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	ids, err := parseIDs(req.GetIds(), c.maxBatch)
	if err != nil {
		return nil, err
	}
	rg, err := c.currentRing()
	if err != nil {
		return nil, err
	}
	ref := &kvringv1.NamespaceRef{Name: rec.GetName(), Fingerprint: rec.GetFingerprint()}
	replicas := int(max(1, rec.GetReplicationFactor()))
	plans := map[string]*lookupPlan{}
	for i, id := range ids {
		for _, m := range rg.Owners(rec.GetName(), id[:], replicas) {
			p := plans[m.ID]
			if p == nil {
				p = &lookupPlan{m: m}
				plans[m.ID] = p
			}
			p.global = append(p.global, i)
			p.ids = append(p.ids, req.GetIds()[i])
		}
	}
	var pin *kvringv1.LeasePin
	if req.GetPinTtlMs() > 0 {
		pin = &kvringv1.LeasePin{LeaseId: newLeaseID(), TtlMs: req.GetPinTtlMs()}
	}
	parallel(plans, func(p *lookupPlan) {
		if p.m.ID == c.self {
			p.held, _, p.err = c.local.has(ref, p.ids, pin)
		} else {
			pc, err := c.pool.client(p.m.Addr)
			if err != nil {
				p.err = err
				return
			}
			resp, err := pc.Has(ctx, &kvringv1.HasRequest{Caller: c.caller(), Namespace: ref, Ids: p.ids, Pin: pin})
			if err != nil {
				p.err = transfer.FromStatus(err)
				return
			}
			p.held = resp.GetHeld()
		}
		if len(p.held) != len(p.ids) {
			p.err = fmt.Errorf("node %s answered %d of %d ids", p.m.ID, len(p.held), len(p.ids))
			p.held = nil
		}
		for _, h := range p.held {
			p.pinned = p.pinned || h
		}
	})
	held := make([]bool, len(ids))
	var nodes []ring.Member
	for _, p := range plans {
		if p.err != nil {
			c.log.Debug("lookup: owner did not answer", "node", p.m.ID, "err", p.err)
			continue
		}
		for k, h := range p.held {
			if h {
				held[p.global[k]] = true
			}
		}
		if p.pinned {
			nodes = append(nodes, p.m)
		}
	}
	n := 0
	for n < len(held) && held[n] {
		n++
	}
	resp := &kvringv1.LookupResponse{Epoch: rg.Epoch(), Held: uint32(n)}
	if pin != nil && len(nodes) > 0 {
		ttl := time.Duration(pin.GetTtlMs()) * time.Millisecond
		c.mu.Lock()
		c.leases[pin.GetLeaseId()] = coordLease{nodes: nodes, expires: c.now().Add(ttl)}
		c.mu.Unlock()
		resp.LeaseId, resp.LeaseTtlMs = pin.GetLeaseId(), pin.GetTtlMs()
	}
	return resp, nil
}
