package coord

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/moves"
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
		c.learnSpread(m, ref.GetName(), namespace.StoreName(ref.GetName(), ref.GetFingerprint()), runs, widths)
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
	// moves names the members besides its owners that may hold an id's
	// chunk (nil: nobody), as of now.
	moves *moves.View
	now   time.Time
	pin   *kvringv1.LeasePin
	held  []bool
	asked map[string]bool
	// failed are the members that did not answer a round of this lookup
	// (down, or not within PeerTimeout): later rounds do not ask them again,
	// so one member that is down costs a lookup one PeerTimeout at most, and
	// what it alone holds counts as not held.
	failed map[string]bool
	// unanswered are the members this lookup meant to ask and could not
	// tell anything (an error, or no time left), with why.
	unanswered map[string]error
	pinned     map[string]*pinnedOn
}

// answerMargin is how long before its caller's deadline a lookup stops
// asking and answers with the prefix found so far (a shorter one: honest,
// since only what can be fetched now counts): a caller that gives up on the
// call gets nothing at all. At most a tenth of the time the caller gave.
const answerMargin = time.Second

// answerBy bounds ctx so that a lookup answers before its caller's deadline
// (answerMargin, at most a tenth of the time left); a ctx without a
// deadline is returned as it is.
func answerBy(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	margin := min(answerMargin, time.Until(dl)/10)
	return context.WithDeadline(ctx, dl.Add(-margin))
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
func (c *Coordinator) lookup(ctx context.Context, req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	resp, _, err := c.lookupTx(ctx, req)
	return resp, err
}

// Lookup is lookup for an in-process caller (the local socket): the
// Cache service's Lookup with its errors as domain errors (transfer's
// sentinels), which the caller maps to its own protocol.
func (c *Coordinator) Lookup(ctx context.Context, req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	return c.lookup(ctx, req)
}

// LookupChecked is Lookup for an in-process caller that must tell "not
// held" from "could not ask" (the Redis port's EXISTS): besides the answer,
// unanswered is an error wrapping transfer.ErrUnavailable, naming them,
// when the first id not counted may be held by a member that could not
// answer (down, not within PeerTimeout, or past the caller's time) or by an
// owner of it that was declared dead lately (it may come back with it);
// nil when every member that may hold it said that it does not. Each id
// that is not counted is meant, so callers ask about one id per call for
// an exact answer. Blocks as Lookup does.
func (c *Coordinator) LookupChecked(ctx context.Context, req *kvringv1.LookupRequest) (resp *kvringv1.LookupResponse, unanswered error, err error) {
	resp, tx, err := c.lookupTx(ctx, req)
	if err != nil || int(resp.GetHeld()) >= len(tx.ids) {
		return resp, nil, err
	}
	var why []string
	for _, id := range slices.Sorted(maps.Keys(tx.unanswered)) {
		why = append(why, fmt.Sprintf("node %s: %v", id, tx.unanswered[id]))
	}
	for _, d := range c.departed.owners(tx.ns, tx.place.keys[resp.GetHeld()], tx.replicas, c.cfg.Now()) {
		if d.Died {
			why = append(why, fmt.Sprintf("node %s: an owner until it was declared dead %s ago", d.ID, d.Ago.Round(time.Second)))
		}
	}
	for _, id := range c.departed.unrecorded(tx.rg, tx.ns, tx.place.keys[resp.GetHeld()], tx.replicas) {
		why = append(why, fmt.Sprintf("node %s: an owner in a ring of a moment ago or since (down, or back?): not asked", id))
	}
	if len(why) > 0 {
		unanswered = fmt.Errorf("%w: a member that may hold the chunk did not answer: %s", transfer.ErrUnavailable, strings.Join(why, "; "))
	}
	return resp, unanswered, nil
}

// lookupTx runs a lookup and returns its answer and what it asked.
func (c *Coordinator) lookupTx(ctx context.Context, req *kvringv1.LookupRequest) (resp *kvringv1.LookupResponse, tx *lookupTx, err error) {
	defer metrics.ObserveSince(c.m.LookupSeconds, time.Now())
	tx, err = c.newLookup(req)
	if err != nil {
		return nil, nil, err
	}
	c.cfg.Load.Add()
	actx, cancel := answerBy(ctx)
	defer cancel()
	for lo, width := 0, firstWave(tx.place); lo < len(tx.ids); width *= 2 {
		hi := tx.place.waveEnd(lo, width)
		tx.wave(actx, lo, hi)
		if leadingRun(tx.held[:hi]) < hi || actx.Err() != nil {
			break
		}
		lo = hi
	}
	n := leadingRun(tx.held)
	if tx.pin != nil {
		n = tx.trimPins(ctx, n) // with the caller's time: unpinning what is not counted must not be cut short
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
	return resp, tx, nil
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
		held: make([]bool, len(req.GetIds())), asked: map[string]bool{}, failed: map[string]bool{}, pinned: map[string]*pinnedOn{},
		unanswered: map[string]error{}}
	tx.replicas, _ = replication(rec)
	// While unsettled (tests, and nodes that keep no hand-off summaries)
	// every member is asked.
	tx.unsettled = c.isUnsettled()
	if !tx.unsettled {
		tx.spread = c.newSpreadPicks(rr.ring, rec, rr.ns, rr.place.grouped)
		tx.moves, tx.now = c.movesView(), c.cfg.Now()
	}
	if ttl := min(time.Duration(req.GetPinTtlMs())*time.Millisecond, c.cfg.MaxPin); ttl > 0 {
		tx.pin = &kvringv1.LeasePin{LeaseId: owner.NewLeaseID(), TtlMs: uint32(ttl / time.Millisecond)}
	}
	return tx, nil
}

// wave asks about the ids at request positions [lo, hi) in rounds. The
// first round asks, per id, one member that should hold its chunk (a member
// of its group's spread set when the group is spread, else its primary
// owner, or an owner this node or the lookup asks anyway: firstOwner) and the members that may hold it
// besides its owners: every member while unsettled, else those whose
// hand-off summaries name its partition (tx.moves). The rest of its owners
// are asked later (askRest), only about what the first round did not find:
// with replication above 1 a settled lookup asks one owner of a group, not
// all of them. An id asked of other members than its owners is asked of all
// its owners again (a chunk on its way to its owner is copied there before
// its source evicts it, so an owner asked before the copy and a source
// asked after the eviction both miss it, and the owner asked again has it).
func (tx *lookupTx) wave(ctx context.Context, lo, hi int) {
	plans := map[string]*lookupPlan{}
	rest := make([][]ring.Member, hi-lo) // per position: the members askRest asks
	wide := 0                            // positions asked of members besides their owners
	room := hi - lo                      // every member's share while unsettled
	if k := tx.rg.Len(); !tx.unsettled && k > 1 {
		room = min(room, room*max(1, tx.replicas)/k+8) // about an owner's share
	}
	var first []ring.Member // the first round's members of the group at i-1
	for i := lo; i < hi; i++ {
		if i == lo || tx.place.group[i] != tx.place.group[i-1] {
			var w bool
			first, rest[i-lo], w = tx.route(tx.place.keys[i], plans)
			if w {
				wide += min(tx.place.waveEnd(i, 1), hi) - i
			}
		} else {
			rest[i-lo] = rest[i-lo-1]
		}
		addToPlans(plans, first, i, tx.ids[i], tx.key(i), room)
	}
	tx.ask(ctx, plans)
	if wide > 0 {
		tx.c.m.LookupWideIDs.Add(float64(wide))
	}
	tx.askRest(ctx, lo, hi, rest, room)
}

// route returns the members a lookup asks first about the ids placed by
// key, the members it asks later about what those did not hold (rest), and
// whether the first are more than the key's owners (wide).
func (tx *lookupTx) route(key []byte, plans map[string]*lookupPlan) (first, rest []ring.Member, wide bool) {
	owners := tx.c.readOwners(tx.rg, tx.ns, key, tx.replicas)
	if tx.unsettled {
		return tx.rg.Members(), owners, true
	}
	if len(owners) == 0 {
		return nil, nil, false
	}
	n := len(owners)
	all := tx.moves.Extra(owners, 0, tx.rg, tx.ns, key, tx.replicas, tx.now)
	head := tx.c.firstOwner(owners, func(id string) bool { return tx.asked[id] || plans[id] != nil }, tx.failed)
	if pk := tx.spread.of(key); pk.ok {
		head = pk.m // a spread group is read from one member of its set
	}
	first = append([]ring.Member{head}, withoutMember(all[n:], head)...)
	if len(all) > n {
		return first, all[:n:n], true
	}
	return first, withoutMember(all[:n], head), false
}

// firstOwner is the owner a lookup asks first: this node when it is one
// (answered in process); else, of the owners neither known down nor
// suspected by gossip (asking such a member first would cost the lookup
// its timeout), one the lookup asks anyway (asked: another group's owner),
// else the first in ring order; else the primary. Any owner will do: the
// others are asked about what it lacks, and one node asked about two
// groups is one node fewer asked.
func (c *Coordinator) firstOwner(owners []ring.Member, asked func(id string) bool, failed map[string]bool) ring.Member {
	if i := slices.IndexFunc(owners, func(m ring.Member) bool { return m.ID == c.cfg.Self }); i >= 0 {
		return owners[i]
	}
	usable := func(m ring.Member) bool { return !failed[m.ID] && !c.peers.isDown(m.ID) && !c.suspected(m.ID) }
	if i := slices.IndexFunc(owners, func(m ring.Member) bool { return asked(m.ID) && usable(m) }); i >= 0 {
		return owners[i]
	}
	if i := slices.IndexFunc(owners, usable); i >= 0 {
		return owners[i]
	}
	return owners[0]
}

// askRest asks the members in rest (indexed by position - lo) about the
// positions of [lo, hi) that are not held yet, from the first of them on:
// the positions of one group first, then of two, four, ... more groups,
// and stops once a position stays not held: by the prefix property no
// later id can extend the answer. So a lookup whose first round found its
// whole prefix asks nobody more, and one that ends inside a group asks that
// group's other owners alone.
func (tx *lookupTx) askRest(ctx context.Context, lo, hi int, rest [][]ring.Member, room int) {
	from := lo
	for groups := 1; ; groups *= 2 {
		start := max(from, leadingRun(tx.held[:hi]))
		if start >= hi {
			return
		}
		end := min(tx.place.waveEnd(start, groups), hi)
		plans := map[string]*lookupPlan{}
		for i := start; i < end; i++ {
			if !tx.held[i] && len(rest[i-lo]) > 0 {
				addToPlans(plans, rest[i-lo], i, tx.ids[i], tx.key(i), room)
			}
		}
		if len(plans) > 0 {
			tx.ask(ctx, plans)
		}
		if leadingRun(tx.held[:hi]) < end {
			return
		}
		from = end
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
	if err := ctx.Err(); err != nil {
		for id := range plans {
			tx.unanswered[id] = err
		}
		return // past the time to answer by (answerBy): what was not asked counts as not held
	}
	for id := range plans {
		if tx.failed[id] {
			delete(plans, id) // it did not answer this lookup before: its ids count as not held there
			continue
		}
		tx.asked[id] = true
	}
	if len(plans) == 0 {
		return
	}
	tx.c.askOwners(ctx, tx.ref, plans, tx.pin, tx.held)
	for _, p := range plans {
		if p.err != nil {
			tx.unanswered[p.m.ID] = p.err
		}
		if p.err != nil && ctx.Err() == nil {
			tx.failed[p.m.ID] = true
		}
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
