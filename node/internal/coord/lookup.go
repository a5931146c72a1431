package coord

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/owner"
	"github.com/kvring/kvring/node/internal/tenant"
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
// reports held. keys are the ids' group keys (nil: the namespace places
// chunks by their ids): the owner counts the lookup per group and answers
// which groups are spread, which is recorded. A peer's answer is noted for
// the outage log.
func (c *Coordinator) hasOn(ctx context.Context, m ring.Member, ref *kvringv1.NamespaceRef, ids, keys [][]byte, pin *kvringv1.LeasePin) ([]bool, error) {
	var runs []*kvringv1.GroupRun
	if keys != nil {
		runs = transfer.GroupRuns(keys)
	}
	if m.ID == c.cfg.Self {
		held, _, _, err := c.local.Lookup(tenant.From(ctx), ref, ids, runs, pin) // widths: this node's own records
		return held, err
	}
	held, widths, err := c.askPeer(ctx, m, ref, ids, runs, pin)
	c.peers.note(ctx, m, err)
	if err == nil && len(held) != len(ids) {
		err = fmt.Errorf("node %s answered %d of %d ids", m.ID, len(held), len(ids))
	}
	if err == nil && len(runs) > 0 {
		c.learnSpread(namespace.StoreName(ref.GetName(), ref.GetFingerprint()), runs, widths)
	}
	return held, err
}

// askPeer sends one Has request to peer m, bounded by peerTimeout; without
// a pin it may share a call with concurrent requests to m (hasCoalescer).
func (c *Coordinator) askPeer(ctx context.Context, m ring.Member, ref *kvringv1.NamespaceRef, ids [][]byte, runs []*kvringv1.GroupRun, pin *kvringv1.LeasePin) ([]bool, []uint32, error) {
	pc, err := c.peer(m)
	if err != nil {
		return nil, nil, err
	}
	if pin != nil { // the owner charges the pins to the engine's share
		ctx = tenant.Outgoing(ctx)
	}
	resp, err := c.has.has(ctx, m.Addr, pc.Has, &kvringv1.HasRequest{Caller: c.caller(), Namespace: ref, Ids: ids, Pin: pin, Groups: runs})
	if err != nil {
		return nil, nil, transfer.FromStatus(err)
	}
	c.cfg.Loads.Note(m.ID, resp.GetLoad())
	return resp.GetHeld(), resp.GetSpreadWidth(), nil
}

// askOwners sends each plan's ids to its node (in process for this node), in
// parallel, each bounded by peerTimeout, and marks in held (indexed by
// request position) what some owner holds. An owner that does not answer
// holds nothing. With pin set, the holders pin what they report, and each
// plan's pinned lists the request positions its node pinned.
func (c *Coordinator) askOwners(ctx context.Context, ref *kvringv1.NamespaceRef, plans map[string]*lookupPlan, pin *kvringv1.LeasePin, held []bool) {
	parallel(plans, func(p *lookupPlan) {
		p.held, p.err = c.hasOn(ctx, p.m, ref, p.ids, p.keys, pin)
	})
	for _, p := range plans {
		if p.err != nil {
			c.log.Debug("lookup: owner did not answer; its ids count as not held", "node", p.m.ID, "err", p.err)
			continue
		}
		for k, h := range p.held {
			if h {
				held[p.global[k]] = true
				if pin != nil {
					p.pinned = append(p.pinned, p.global[k])
				}
			}
		}
	}
}

// lookupPlan is one node's share of a lookup wave.
type lookupPlan struct {
	m      ring.Member
	global []int
	ids    [][]byte
	keys   [][]byte // group key per id; nil when the namespace places by ids
	held   []bool
	err    error
	pinned []int // request positions the node pinned
}

// addToPlans adds the id at request position i, placed by group key (nil:
// by its id), to the plan of each member. room is how many ids the round may
// add at most: a new plan gets that much room, so that its lists do not grow
// id by id.
func addToPlans(plans map[string]*lookupPlan, members []ring.Member, i int, id, key []byte, room int) {
	for _, m := range members {
		p := plans[m.ID]
		if p == nil {
			p = &lookupPlan{m: m, global: make([]int, 0, room), ids: make([][]byte, 0, room)}
			if key != nil {
				p.keys = make([][]byte, 0, room)
			}
			plans[m.ID] = p
		}
		p.global = append(p.global, i)
		p.ids = append(p.ids, id)
		if key != nil {
			p.keys = append(p.keys, key)
		}
	}
}

// lookupTx is one Lookup: the request resolved, and what its waves found.
type lookupTx struct {
	c         *Coordinator
	ref       *kvringv1.NamespaceRef
	ns        string
	rg        *ring.Ring
	ids       [][]byte
	place     *placement
	storeNS   string       // the namespace's store name (spread records)
	spread    *spreadPicks // nil: every group is read from its owners
	replicas  int
	unsettled bool
	pin       *kvringv1.LeasePin
	held      []bool
	asked     map[string]bool
	pinned    map[string]*pinnedOn
}

// pinnedOn is what one node pinned under the lookup's lease.
type pinnedOn struct {
	m         ring.Member
	positions []int
}

// lookup answers how many leading ids are held now by a reachable owner.
// It asks the owners group by group in waves of doubling width (the first
// wave about minFirstWave ids, in whole groups; then twice as many groups
// each time), each wave one batch per node in parallel, and stops after
// the first wave that is not held throughout: by the prefix property no
// later id can extend the answer. With a pin TTL the holders pin what they
// report under one lease id, and a node that pinned past the answer pins
// again (trimPins), so the lease pins exactly the counted chunks. An owner that does not answer within
// the call's deadline counts as not holding anything.
func (c *Coordinator) lookup(ctx context.Context, req *kvringv1.LookupRequest) (resp *kvringv1.LookupResponse, err error) {
	defer metrics.ObserveSince(c.m.LookupSeconds, time.Now())
	tx, err := c.newLookup(req)
	if err != nil {
		return nil, err
	}
	c.cfg.Load.Add()
	for lo, width := 0, firstWave(tx.place); lo < len(tx.ids); width *= 2 {
		hi := tx.place.waveEnd(lo, width)
		tx.wave(ctx, lo, hi)
		if leadingRun(tx.held[:hi]) < hi {
			break
		}
		lo = hi
	}
	n := leadingRun(tx.held)
	if tx.pin != nil {
		n = tx.trimPins(ctx, n)
	}
	resp = &kvringv1.LookupResponse{Epoch: tx.rg.Epoch(), Held: uint32(n),
		SpreadWidth: c.spreadWidths(tx.storeNS, req.GetGroups(), min(len(tx.ids), n+1)), Load: c.cfg.Load.Rate()}
	if nodes := tx.pinnedNodes(); len(nodes) > 0 {
		ttl := time.Duration(tx.pin.GetTtlMs()) * time.Millisecond
		c.recordLease(tx.pin.GetLeaseId(), nodes, ttl, tenant.From(ctx))
		if n == 0 || ctx.Err() != nil { // pins past a miss at position 0, or a caller gone: nothing to hand out
			c.releaseLease(context.WithoutCancel(ctx), tx.pin.GetLeaseId())
		} else {
			resp.LeaseId, resp.LeaseTtlMs = tx.pin.GetLeaseId(), tx.pin.GetTtlMs()
		}
	}
	c.m.Lookups.Inc()
	c.m.LookupIDs.Add(float64(len(tx.ids)))
	c.m.LookupIDsMatched.Add(float64(n))
	c.m.LookupFanout.Observe(float64(len(tx.asked)))
	return resp, nil
}

// minFirstWave is the fewest ids the first wave of a lookup asks about when
// groups are smaller: one 512-token block of 16-token chunks. In a
// namespace without groups a wave of one id would add round trips for
// nothing, since most prompts hold more than one chunk.
const minFirstWave = 32

// firstWave is the number of groups of a lookup's first wave.
func firstWave(p *placement) int {
	if p.n == 0 {
		return 1
	}
	perGroup := max(1, len(p.keys)/p.n)
	return max(1, minFirstWave/perGroup)
}

// newLookup resolves and checks a Lookup request.
func (c *Coordinator) newLookup(req *kvringv1.LookupRequest) (*lookupTx, error) {
	rr, err := c.resolveRead(req.GetNamespace(), req.GetIds(), req.GetGroups())
	if err != nil {
		return nil, err
	}
	rec := rr.rec
	tx := &lookupTx{c: c, ref: nsRef(rec), ns: rec.GetName(), rg: rr.ring, ids: req.GetIds(), place: rr.place, storeNS: rr.ns,
		held: make([]bool, len(req.GetIds())), asked: map[string]bool{}, pinned: map[string]*pinnedOn{}}
	tx.replicas, _ = replication(rec)
	// Shortly after a ring change (or this node's start) a chunk may sit on a
	// non-owner, stored by a coordinator whose ring was behind: ask every
	// member then.
	tx.unsettled = c.isUnsettled()
	if !tx.unsettled {
		tx.spread = c.newSpreadPicks(rr.ring, rec, rr.ns, rr.place.grouped)
	}
	if ttl := min(time.Duration(req.GetPinTtlMs())*time.Millisecond, c.cfg.MaxPin); ttl > 0 {
		tx.pin = &kvringv1.LeasePin{LeaseId: owner.NewLeaseID(), TtlMs: uint32(ttl / time.Millisecond)}
	}
	return tx, nil
}

// wave asks the owners of the ids at request positions [lo, hi): every
// member while unsettled, then the owners once more about what nobody held
// (a chunk on its way to its owner is copied there before its source
// evicts it, so an owner asked before the copy and a source asked after the
// eviction both miss it, and the owner asked again has it). A spread
// group's ids go to one of its spread members first, and to the owners for
// what that member lacks.
func (tx *lookupTx) wave(ctx context.Context, lo, hi int) {
	plans := map[string]*lookupPlan{}
	var first map[int]ring.Member // positions asked of a spread member
	var members, owners []ring.Member
	if tx.unsettled {
		members = tx.rg.Members()
	} else {
		owners = make([]ring.Member, 0, tx.replicas)
	}
	room := hi - lo // every member's share while unsettled
	if k := tx.rg.Len(); !tx.unsettled && k > 1 {
		room = min(room, room*max(1, tx.replicas)/k+8) // about an owner's share
	}
	for i := lo; i < hi; i++ {
		switch pk := tx.spread.of(tx.place.keys[i]); {
		case tx.unsettled:
			addToPlans(plans, members, i, tx.ids[i], tx.key(i), room)
		case pk.ok:
			if first == nil {
				first = make(map[int]ring.Member)
			}
			first[i] = pk.m
			addToPlans(plans, []ring.Member{pk.m}, i, tx.ids[i], tx.key(i), room)
		default:
			owners = tx.c.appendReadOwners(owners[:0], tx.rg, tx.ns, tx.place.keys[i], tx.replicas)
			addToPlans(plans, owners, i, tx.ids[i], tx.key(i), room)
		}
	}
	tx.ask(ctx, plans)
	if !tx.unsettled && len(first) == 0 {
		return
	}
	again := map[string]*lookupPlan{}
	for i := lo; i < hi; i++ {
		if tx.held[i] {
			continue
		}
		owners := tx.c.readOwners(tx.rg, tx.ns, tx.place.keys[i], tx.replicas)
		if m, ok := first[i]; ok {
			owners = withoutMember(owners, m)
		} else if !tx.unsettled {
			continue
		}
		addToPlans(again, owners, i, tx.ids[i], tx.key(i), room)
	}
	if len(again) > 0 {
		tx.ask(ctx, again)
	}
}

// key is the group key sent with the id at position i: nil when the
// namespace places chunks by their ids.
func (tx *lookupTx) key(i int) []byte {
	if !tx.place.grouped {
		return nil
	}
	return tx.place.keys[i]
}

// ask runs one round of a wave's plans and records who pinned what.
func (tx *lookupTx) ask(ctx context.Context, plans map[string]*lookupPlan) {
	for id := range plans {
		tx.asked[id] = true
	}
	tx.c.askOwners(ctx, tx.ref, plans, tx.pin, tx.held)
	for _, p := range plans {
		if len(p.pinned) > 0 {
			on := tx.pinned[p.m.ID]
			if on == nil {
				on = &pinnedOn{m: p.m}
				tx.pinned[p.m.ID] = on
			}
			on.positions = append(on.positions, p.pinned...)
		}
	}
}

// trimPins makes the lease pin only the counted prefix [0, n): a node that
// pinned past it (a chunk held after the first miss of the last wave) drops
// the lease and pins its counted chunks again. It returns the prefix still
// pinned: a chunk evicted in between ends it.
func (tx *lookupTx) trimPins(ctx context.Context, n int) int {
	var redo []*pinnedOn
	for _, on := range tx.pinned {
		if slices.Max(on.positions) >= n {
			redo = append(redo, on)
		}
	}
	if len(redo) == 0 {
		return n
	}
	plans := map[string]*lookupPlan{}
	for _, on := range redo {
		tx.c.unpinOn(ctx, on.m, tx.pin.GetLeaseId())
		delete(tx.pinned, on.m.ID)
		for _, i := range on.positions {
			if i < n {
				addToPlans(plans, []ring.Member{on.m}, i, tx.ids[i], tx.key(i), len(on.positions))
			}
		}
	}
	again := make([]bool, len(tx.ids))
	copy(again, tx.held[:n])
	for _, p := range plans {
		for _, i := range p.global {
			again[i] = false
		}
	}
	tx.c.askOwners(ctx, tx.ref, plans, tx.pin, again)
	for _, p := range plans {
		if len(p.pinned) > 0 {
			tx.pinned[p.m.ID] = &pinnedOn{m: p.m, positions: p.pinned}
		}
	}
	return leadingRun(again[:n])
}

// pinnedNodes are the nodes that pinned something under the lookup's lease.
func (tx *lookupTx) pinnedNodes() []ring.Member {
	nodes := make([]ring.Member, 0, len(tx.pinned))
	for _, on := range tx.pinned {
		nodes = append(nodes, on.m)
	}
	return nodes
}
