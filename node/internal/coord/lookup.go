package coord

import (
	"context"
	"fmt"
	"time"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// leadingRun counts the leading true values.
func leadingRun(held []bool) int {
	n := 0
	for n < len(held) && held[n] {
		n++
	}
	return n
}

// hasOn asks one owner (this node in process, or a peer) which of ids it
// holds now, bounded by peerTimeout. With pin set, the owner pins what it
// reports held. A peer's answer is noted for the outage log.
func (c *Coordinator) hasOn(ctx context.Context, m ring.Member, ref *kvringv1.NamespaceRef, ids [][]byte, pin *kvringv1.LeasePin) ([]bool, error) {
	if m.ID == c.cfg.Self {
		held, _, err := c.local.Has(ref, ids, pin)
		return held, err
	}
	held, err := c.askPeer(ctx, m, ref, ids, pin)
	c.peers.note(ctx, m, err)
	if err == nil && len(held) != len(ids) {
		err = fmt.Errorf("node %s answered %d of %d ids", m.ID, len(held), len(ids))
	}
	return held, err
}

// askPeer sends one Has request to peer m, bounded by peerTimeout.
func (c *Coordinator) askPeer(ctx context.Context, m ring.Member, ref *kvringv1.NamespaceRef, ids [][]byte, pin *kvringv1.LeasePin) ([]bool, error) {
	pc, err := c.peer(m)
	if err != nil {
		return nil, err
	}
	pctx, cancel := c.peerCtx(ctx)
	defer cancel()
	resp, err := pc.Has(pctx, &kvringv1.HasRequest{Caller: c.caller(), Namespace: ref, Ids: ids, Pin: pin})
	if err != nil {
		return nil, transfer.FromStatus(err)
	}
	return resp.GetHeld(), nil
}

// askOwners sends each plan's ids to its node (in process for this node), in
// parallel, each bounded by peerTimeout, and returns per request position
// whether some owner holds the id. An owner that does not answer holds
// nothing. With pin set, the holders pin what they report.
func (c *Coordinator) askOwners(ctx context.Context, ref *kvringv1.NamespaceRef, plans map[string]*lookupPlan, pin *kvringv1.LeasePin, size int) []bool {
	parallel(plans, func(p *lookupPlan) {
		p.held, p.err, p.pinned = nil, nil, false
		held, err := c.hasOn(ctx, p.m, ref, p.ids, pin)
		if err != nil {
			p.err = err
			return
		}
		p.held = held
		for _, h := range held {
			p.pinned = p.pinned || (h && pin != nil)
		}
	})
	held := make([]bool, size)
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
	}
	return held
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

// addToPlans adds the id at request position i to the plan of each member.
func addToPlans(plans map[string]*lookupPlan, members []ring.Member, i int, id []byte) {
	for _, m := range members {
		p := plans[m.ID]
		if p == nil {
			p = &lookupPlan{m: m}
			plans[m.ID] = p
		}
		p.global = append(p.global, i)
		p.ids = append(p.ids, id)
	}
}

// lookup answers how many leading ids are held now by a reachable owner,
// asking every owner of every id in parallel, one batch per node. With a pin
// TTL the holders pin them under one lease id. An owner that does not answer
// within the call's deadline counts as not holding anything.
func (c *Coordinator) lookup(ctx context.Context, req *kvringv1.LookupRequest) (resp *kvringv1.LookupResponse, err error) {
	defer metrics.ObserveSince(c.m.LookupSeconds, time.Now())
	defer func() {
		if err == nil {
			c.m.Lookups.Inc()
			c.m.LookupIDs.Add(float64(len(req.GetIds())))
			c.m.LookupIDsMatched.Add(float64(resp.GetHeld()))
		}
	}()
	_, rec, err := c.reg.Resolve(req.GetNamespace())
	if err != nil {
		return nil, err
	}
	ids, err := owner.ParseIDs(req.GetIds(), c.cfg.MaxBatch)
	if err != nil {
		return nil, err
	}
	rg, err := c.currentRing()
	if err != nil {
		return nil, err
	}
	ref := nsRef(rec)
	replicas, _ := replication(rec)
	// Shortly after a ring change (or this node's start) a chunk may sit on a
	// non-owner, stored by a coordinator whose ring was behind: ask every
	// member then, in the same round.
	unsettled := c.isUnsettled()
	plans := map[string]*lookupPlan{}
	for i, id := range ids {
		members := rg.Owners(rec.GetName(), id[:], replicas)
		if unsettled {
			members = rg.Members()
		}
		addToPlans(plans, members, i, req.GetIds()[i])
	}
	// Round 1: who holds what. Pins are taken in round 2, for the leading
	// run only, so a lease never holds chunks the answer does not count.
	held := c.askOwners(ctx, ref, plans, nil, len(ids))
	n := leadingRun(held)
	resp = &kvringv1.LookupResponse{Epoch: rg.Epoch(), Held: uint32(n)}
	ttl := min(time.Duration(req.GetPinTtlMs())*time.Millisecond, c.cfg.MaxPin)
	if ttl <= 0 || n == 0 {
		return resp, nil
	}
	pinPlans := map[string]*lookupPlan{}
	for id, p := range plans {
		q := &lookupPlan{m: p.m}
		for k, g := range p.global {
			if g < n && p.held != nil && p.held[k] {
				q.global = append(q.global, g)
				q.ids = append(q.ids, p.ids[k])
			}
		}
		if len(q.ids) > 0 {
			pinPlans[id] = q
		}
	}
	pin := &kvringv1.LeasePin{LeaseId: owner.NewLeaseID(), TtlMs: uint32(ttl / time.Millisecond)}
	pinned := c.askOwners(ctx, ref, pinPlans, pin, n)
	// A chunk evicted between the rounds is not pinned: count only what is.
	resp.Held = uint32(leadingRun(pinned))
	var nodes []ring.Member
	for _, p := range pinPlans {
		if p.pinned {
			nodes = append(nodes, p.m)
		}
	}
	if len(nodes) > 0 {
		c.recordLease(pin.GetLeaseId(), nodes, ttl)
		resp.LeaseId, resp.LeaseTtlMs = pin.GetLeaseId(), pin.GetTtlMs()
	}
	return resp, nil
}
