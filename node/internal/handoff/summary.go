package handoff

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kvring/kvring/node/internal/moves"
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
//     and its chunks are staged or held here.
//
// Until the first pass the summary is moves.Unknown (this node's catalog
// may hold anything). A summary only shrinks after a pass evicted what it no
// longer names (the owners hold those chunks then).

// placedGrace is how long a staged write whose partition this node owns is
// remembered: longer than a stage lease (30 s by default), after which it
// has sealed or been freed. One whose partition it does not own is
// remembered while its chunks are staged or held here.
const placedGrace = 45 * time.Second

// maxPlacedIDs is how many chunks a remembered write keeps per partition;
// past that it is remembered for placedGrace whatever happens to them.
const maxPlacedIDs = 16

// placedKey is a partition and the replication a chunk of it was written
// with (whether this node owns it depends on both).
type placedKey struct{ part, replicas int }

// placed is what is remembered of the writes of one placedKey.
type placed struct {
	at   time.Time // the last
	ids  []chunkRef
	many bool // more than maxPlacedIDs chunks
}

// chunkRef names a chunk: its store namespace and id.
type chunkRef struct {
	ns string
	id store.ID
}

// live reports whether some of the chunks are staged or held in st.
func (p *placed) live(st Store) bool {
	for _, c := range p.ids {
		if st.Staging(c.ns, c.id) || st.Contains(c.ns, c.id) {
			return true
		}
	}
	return false
}

// summaryState is the summary this node gossips and what it is built from.
// Guarded by Mover.sumMu.
type summaryState struct {
	ring   *ring.Ring // the ring of the last pass's plan; nil: none yet
	parts  map[int]bool
	recent map[placedKey]*placed // writes staged lately
}

// owns reports whether self is among the r owners of partition p on rg.
func owns(rg *ring.Ring, p, r int, self string) bool {
	return slices.ContainsFunc(rg.PartitionOwners(p, r), func(o ring.Member) bool { return o.ID == self })
}

// Placed tells the Mover that a write of chunks ids of namespace name
// (store namespace ns) placed by keys, with replication r, was staged here
// (not spread copies). It keeps neither slice. It never blocks: a partition
// the summary did not name is gossiped by the publish goroutine. Safe for
// concurrent use.
func (m *Mover) Placed(name, ns string, r int, keys [][]byte, ids []store.ID) {
	rg := m.cfg.Ring()
	if rg == nil || rg.Len() == 0 {
		return
	}
	now := m.cfg.Now()
	added := false
	m.sumMu.Lock()
	for i, k := range keys {
		p := rg.Partition(name, k)
		e := m.sum.recent[placedKey{p, r}]
		if e == nil {
			e = &placed{}
			m.sum.recent[placedKey{p, r}] = e
		}
		e.at = now
		if len(e.ids) < maxPlacedIDs {
			e.ids = append(e.ids, chunkRef{ns, ids[i]})
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
	}
}

// planned makes the summary name parts on rg, and the partitions of the
// writes remembered (Placed) that this node does not own on rg while their
// chunks are staged or held here: a write staged before a pass listed the
// store may seal after the listing.
func (m *Mover) planned(rg *ring.Ring, parts []int, listed time.Time) {
	set := make(map[int]bool, len(parts))
	for _, p := range parts {
		set[p] = true
	}
	cutoff := listed.Add(-placedGrace)
	m.sumMu.Lock()
	defer m.sumMu.Unlock()
	for k, e := range m.sum.recent {
		switch {
		case owns(rg, k.part, k.replicas, m.cfg.Self):
			if e.at.Before(cutoff) {
				delete(m.sum.recent, k)
			}
		case e.live(m.cfg.Store) || e.many && !e.at.Before(cutoff):
			set[k.part] = true
		default:
			delete(m.sum.recent, k) // handed off, evicted or never sealed
		}
	}
	m.sum.ring, m.sum.parts = rg, set
}

// Summary is the hand-off summary this node gossips now (or will, once the
// publish goroutine or the pass running has sent it).
func (m *Mover) Summary() moves.Summary {
	m.sumMu.Lock()
	defer m.sumMu.Unlock()
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

// publishLoop gossips the summary when Placed changed it, until ctx ends.
func (m *Mover) publishLoop(ctx context.Context) {
	defer m.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.pub:
			m.publish(ctx)
		}
	}
}
