package handoff

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kvring/kvring/node/internal/moves"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// The hand-off summary. Readers ask this node about a partition it does not
// own only when its gossiped summary names the partition (package moves). So
// the summary, computed against ring S, must name every partition of which
// this node holds a chunk while it is none of the partition's owners in S:
//
//   - a pass names the partitions of the misplaced chunks it lists (plan)
//     and, when it ends, of those it could not hand off;
//   - a write staged here (Placed) names its partitions at once when this
//     node owns none of them in S, and is remembered: a write staged before
//     a pass listed the store may seal after the listing, so the pass names
//     its partitions too when they are not this node's on the pass's ring
//     and its chunks are staged or held here; a chunk is forgotten once a
//     listing started after it was found no longer staged.
//
// Until the first pass the summary is what Boot listed of the catalog at
// start-up: every partition in which this node holds chunks, owned or not
// (moves.Summary.AnyRing: true on any ring, since a chunk's partition does
// not depend on the members), and the partition of every write Placed since;
// before Boot it is moves.Unknown (the catalog may hold anything). A
// summary only shrinks after a pass evicted what it no longer names (the
// owners hold those chunks then).

// placedGrace is how long a partition whose writes overflowed
// maxPlacedIDs is named after its last write, when this node does not own
// it: longer than a stage lease (30 s by default), after which every write
// has sealed or been freed.
const placedGrace = 45 * time.Second

// maxPlacedIDs is how many chunks a partition's remembered writes track;
// past that it is named for placedGrace whatever happens to them.
const maxPlacedIDs = 64

// placedKey is a partition and the replication a chunk of it was written
// with (whether this node owns it depends on both).
type placedKey struct{ part, replicas int }

// placed is what is remembered of the writes of one placedKey.
type placed struct {
	at   time.Time // the last
	ids  []placedChunk
	many bool // more than maxPlacedIDs chunks
}

// placedChunk is one chunk written: its store namespace and id, and when a
// check first found it no longer staged (zero: not yet). A listing that
// started after that sees it if it is held, so it is forgotten then.
type placedChunk struct {
	ns   string
	id   store.ID
	done time.Time
}

// check updates the chunks' done times at now, forgets those done before
// listed, and reports whether some chunk is staged or held in st.
func (p *placed) check(st Store, listed, now time.Time) (live bool) {
	kept := p.ids[:0]
	for _, c := range p.ids {
		staging := st.Staging(c.ns, c.id)
		if !staging {
			if c.done.IsZero() {
				c.done = now
			} else if c.done.Before(listed) {
				continue
			}
		}
		live = live || staging || st.Contains(c.ns, c.id)
		kept = append(kept, c)
	}
	p.ids = kept
	return live
}

// summaryState is the summary this node gossips and what it is built from.
// Guarded by Mover.sumMu.
type summaryState struct {
	ring  *ring.Ring // the ring of the last pass's plan; nil: none yet
	parts map[int]bool
	// boot, until the first plan, is every partition this node holds
	// chunks of (Boot, then Placed); nil: not listed (moves.Unknown).
	boot   map[int]bool
	recent map[placedKey]*placed // writes staged since the passes' listings
}

// owns reports whether self is among the r owners of partition p on rg.
func owns(rg *ring.Ring, p, r int, self string) bool {
	return slices.ContainsFunc(rg.PartitionOwners(p, r), func(o ring.Member) bool { return o.ID == self })
}

// Placed tells the Mover that a write of chunks ids of namespace name
// (store namespace ns) placed by keys, with replication r, was staged here
// (not spread copies). It keeps neither slice. It never blocks: a partition
// the summary did not name is gossiped by the publish goroutine (within
// Config.PublishGap), and a pass is asked for. Safe for concurrent use.
func (m *Mover) Placed(name, ns string, r int, keys [][]byte, ids []store.ID) {
	rg := m.cfg.Ring() // before the node joins, an empty ring: its partitions are the same
	if rg == nil {
		return
	}
	now := m.cfg.Now()
	added := false
	m.sumMu.Lock()
	for i, k := range keys {
		p := rg.Partition(name, k)
		if m.sum.ring == nil && m.sum.boot != nil && !m.sum.boot[p] {
			m.sum.boot[p] = true // before the first plan every partition held is named
			added = true
		}
		e := m.sum.recent[placedKey{p, r}]
		if e == nil {
			e = &placed{}
			m.sum.recent[placedKey{p, r}] = e
		}
		e.at = now
		if len(e.ids) < maxPlacedIDs {
			e.ids = append(e.ids, placedChunk{ns: ns, id: ids[i]})
		} else {
			e.many = true
		}
		if s := m.sum.ring; s != nil && !m.sum.parts[p] && !owns(s, p, r, m.cfg.Self) {
			m.sum.parts[p] = true
			added = true
		}
	}
	m.sumMu.Unlock()
	if added {
		select {
		case m.pub <- struct{}{}:
		default:
		}
		m.Kick() // a pass hands the chunks to their owners, and the summary shrinks
	}
}

// planned makes the summary name parts on rg, and the partitions of the
// writes remembered (Placed) that this node does not own on rg while their
// chunks are staged or held here: a write staged before a pass listed the
// store (at listed) may seal after the listing.
func (m *Mover) planned(rg *ring.Ring, parts []int, listed time.Time) {
	set := make(map[int]bool, len(parts))
	for _, p := range parts {
		set[p] = true
	}
	now, cutoff := m.cfg.Now(), listed.Add(-placedGrace)
	m.sumMu.Lock()
	defer m.sumMu.Unlock()
	for k, e := range m.sum.recent {
		live := e.check(m.cfg.Store, listed, now)
		if (live || e.many && !e.at.Before(cutoff)) && !owns(rg, k.part, k.replicas, m.cfg.Self) {
			set[k.part] = true
		}
		if len(e.ids) == 0 && (!e.many || e.at.Before(cutoff)) {
			delete(m.sum.recent, k)
		}
	}
	m.sum.ring, m.sum.parts, m.sum.boot = rg, set, nil
}

// Boot lists the chunks the store holds (its catalog, at start-up) and
// gossips, until the first pass, the summary naming every partition in
// which this node holds chunks, owned or not: readers then ask it about
// those partitions only, whatever ring they have, instead of about every
// partition. Chunks the pass could not place either (a namespace not
// registered here, a grouped chunk without its key) are not named, as a
// pass does not name them. Call it before the node joins (Announce then
// only sets the metadata gossip starts with) and before writes arrive. It
// blocks for Announce.
func (m *Mover) Boot(ctx context.Context) {
	rg := m.cfg.Ring()
	if rg == nil {
		return
	}
	names := map[string]string{} // store namespace → namespace
	grouped := map[string]bool{}
	for _, rec := range m.cfg.Registry.List() {
		sn := namespace.StoreName(rec.GetName(), rec.GetFingerprint())
		names[sn], grouped[sn] = rec.GetName(), namespace.GroupSize(rec.GetSchema()) > 1
	}
	parts := map[int]bool{}
	m.cfg.Store.EachHeld(func(h store.HeldChunk) {
		if name, ok := names[h.Namespace]; ok && (!grouped[h.Namespace] || h.Keyed) {
			parts[rg.Partition(name, h.Place[:])] = true
		}
	})
	m.sumMu.Lock()
	if m.sum.ring == nil {
		for k := range m.sum.recent { // staged before the listing, sealed after it
			parts[k.part] = true
		}
		m.sum.boot = parts
	}
	m.sumMu.Unlock()
	m.publish(ctx)
}

// forgetListed forgets the remembered writes of chunks a pass listed: its
// plan decides whether their partitions are named (they may be kept as
// spread copies, or owned here).
func (m *Mover) forgetListed(held []store.HeldChunk) {
	m.sumMu.Lock()
	defer m.sumMu.Unlock()
	if len(m.sum.recent) == 0 {
		return
	}
	listed := make(map[placedChunk]bool, len(held))
	for _, h := range held {
		listed[placedChunk{ns: h.Namespace, id: h.ID}] = true
	}
	for _, e := range m.sum.recent {
		e.ids = slices.DeleteFunc(e.ids, func(c placedChunk) bool { return listed[placedChunk{ns: c.ns, id: c.id}] })
	}
}

// Summary is the hand-off summary this node gossips now (or will, once the
// publish goroutine or the pass running has sent it).
func (m *Mover) Summary() moves.Summary {
	m.sumMu.Lock()
	defer m.sumMu.Unlock()
	if m.sum.ring == nil && m.sum.boot != nil {
		return moves.FromCatalog(slices.Collect(maps.Keys(m.sum.boot)))
	}
	if m.sum.ring == nil {
		return moves.Unknown()
	}
	return moves.FromPartitions(moves.RingHash(m.sum.ring), slices.Collect(maps.Keys(m.sum.parts)))
}

// publish gossips the summary if it changed since last gossiped. Calls
// are serialised; it blocks for the gossip broadcast (Config.Announce).
func (m *Mover) publish(ctx context.Context) {
	m.pubMu.Lock()
	defer m.pubMu.Unlock()
	s := m.Summary()
	if m.published != nil && m.published.Equal(s) || m.cfg.Announce == nil {
		return
	}
	if err := m.cfg.Announce(ctx, s); err != nil {
		m.cfg.Log.Warn("cannot gossip the hand-off summary", "partitions", s.Partitions(), "err", err)
	}
	m.published = &s // the metadata changed even when the broadcast was not acknowledged
}

// publishLoop gossips the summary when Placed changed it, until ctx ends,
// then waits Config.PublishGap before the next: the changes of that wait
// go out in one gossip (pub holds one request).
func (m *Mover) publishLoop(ctx context.Context) {
	defer m.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.pub:
			m.publish(ctx)
		}
		if m.cfg.PublishGap > 0 && m.cfg.Sleep(ctx, m.cfg.PublishGap) != nil {
			return
		}
	}
}
