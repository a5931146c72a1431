package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/moves"
	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// getTx is one engine Get: the ids, each id's owners in the order they are
// tried, and one Fetch stream per remote primary owner for its ids in order.
// Not safe for concurrent use.
type getTx struct {
	c       *Coordinator
	ctx     context.Context
	ns      string // store namespace
	ref     *kvringv1.NamespaceRef
	ids     []store.ID
	name    string                  // namespace name (rec.Name), for the owners that departed
	keys    [][]byte                // per id: its placement key
	r       int                     // replication factor
	owners  [][]ring.Member         // per id: owners in ring order (then non-owners while unsettled)
	again   [][]ring.Member         // per id, while unsettled: the owners, asked again after a miss everywhere
	streams map[string]*fetchStream // remote primary owner id → its stream
	epoch   uint64                  // the ring's epoch the ids were placed on
	ring    *ring.Ring              // that ring
	sink    ChunkSink               // the reader: headers, misses and bytes
	send    owner.SendFunc          // sink, as this node's store sends to it (sendTo)
}

// chunkMiss gathers why no owner could send a chunk: one reason per node,
// in the order they were asked.
type chunkMiss struct {
	nodes, reasons []string
	unavailable    int  // owners that did not answer
	badSum         bool // some owner's bytes failed their checksum
}

// add records why node could not send the chunk. A node asked again (while
// the ring is unsettled) keeps its one entry: a different answer is added to
// it ("not held, then ...").
func (m *chunkMiss) add(node string, format string, args ...any) {
	why := fmt.Sprintf(format, args...)
	if i := slices.Index(m.nodes, node); i >= 0 {
		if !strings.HasSuffix(m.reasons[i], why) {
			m.reasons[i] += ", then " + why
		}
		return
	}
	m.nodes = append(m.nodes, node)
	m.reasons = append(m.reasons, why)
}

// String is the reason of the miss: "node a: not held; node b: ...".
func (m *chunkMiss) String() string {
	var b strings.Builder
	for i, n := range m.nodes {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString("node " + n + ": " + m.reasons[i])
	}
	return b.String()
}

// beginGet checks the request and places every id. The caller sets its
// sink (setSink) before it runs.
func (c *Coordinator) beginGet(ctx context.Context, req *kvringv1.GetRequest) (*getTx, error) {
	rr, err := c.resolveRead(req.GetNamespace(), req.GetIds(), req.GetGroups())
	if err != nil {
		return nil, err
	}
	ns, rec, ids, pl, rg := rr.ns, rr.rec, rr.ids, rr.place, rr.ring
	g := &getTx{c: c, ctx: ctx, ns: ns, ref: nsRef(rec), ids: ids, owners: make([][]ring.Member, len(ids)),
		streams: map[string]*fetchStream{}, epoch: rg.Epoch(), ring: rg}
	replicas, _ := replication(rec)
	g.name, g.keys, g.r = rec.GetName(), pl.keys, replicas
	unsettled := c.isUnsettled()
	var picks *spreadPicks
	var view *moves.View
	if !unsettled {
		picks, view = c.newSpreadPicks(rg, rec, ns, pl.grouped), c.movesView()
	}
	// Every id's owners are a window of one buffer (spreadOrder and the
	// unsettled append copy before they change one), and the members are
	// read once.
	owners := make([]ring.Member, 0, len(ids)*max(1, min(replicas, rg.Len())))
	var members []ring.Member
	if unsettled {
		members = rg.Members()
	}
	now := c.cfg.Now()
	for i := range ids {
		start := len(owners)
		owners = c.appendReadOwners(owners, rg, rec.GetName(), pl.keys[i], replicas)
		n := len(owners)
		owners = view.Extra(owners, start, rg, rec.GetName(), pl.keys[i], replicas, now)
		g.owners[i] = owners[start:n:n]
		switch pk := picks.of(pl.keys[i]); {
		case unsettled || len(owners) > n:
			// A chunk may sit on a member that does not own it (every member
			// while unsettled, else those whose hand-off summaries name its
			// partition), or be on its way from one to its owner: the hand-off
			// copies it before it evicts it, so an owner asked before the copy
			// and a non-owner asked after the evict both miss it, and the owner
			// asked again has it.
			if g.again == nil {
				g.again = make([][]ring.Member, len(ids))
			}
			g.again[i] = g.owners[i]
			switch {
			case unsettled:
				g.owners[i] = append(slices.Clip(g.owners[i]), nonOwners(members, g.owners[i])...)
			case pk.ok: // a spread group is still read from one member of its set first
				g.owners[i] = spreadOrder(pk, owners[start:len(owners):len(owners)])
			default:
				g.owners[i] = owners[start:len(owners):len(owners)]
			}
		case pk.ok:
			g.owners[i] = spreadOrder(pk, g.owners[i])
		}
	}
	return g, nil
}

// openStreams opens one Fetch stream per remote primary owner, for its ids
// in order.
func (g *getTx) openStreams(ctx context.Context) {
	c := g.c
	primaries := map[string][][]byte{}
	for i, id := range g.ids {
		if p := g.owners[i][0]; p.ID != c.cfg.Self {
			primaries[p.ID] = append(primaries[p.ID], id[:])
		}
	}
	for i := range g.ids {
		p := g.owners[i][0]
		if p.ID == c.cfg.Self || g.streams[p.ID] != nil {
			continue
		}
		sctx, scancel := context.WithCancel(ctx)
		fs := &fetchStream{m: p, cancel: scancel, timeout: c.cfg.PeerTimeout, recv: c.m.PeerReceived, maxChunk: c.local.MaxChunk()}
		g.streams[p.ID] = fs
		pc, err := c.peer(p)
		if err == nil {
			fs.stream, err = pc.Fetch(sctx, &kvringv1.FetchRequest{Caller: c.caller(), Namespace: g.ref, Ids: primaries[p.ID]})
		}
		if err != nil {
			fs.broken = transfer.FromStatus(err)
			c.peers.note(g.ctx, p, fs.broken)
		}
	}
}

// noteStreams tells the outage log which primaries answered throughout.
func (g *getTx) noteStreams() {
	for _, fs := range g.streams {
		if fs.broken == nil && fs.answered {
			g.c.peers.ok(fs.m)
		}
	}
}

// serve sends the chunk at position idx from the first of its owners that
// has it, or a miss saying why none could (a MissError). err is the sink's.
func (g *getTx) serve(idx uint32, id store.ID) error {
	var miss chunkMiss
	asked := g.owners[idx]
	if g.again != nil {
		asked = append(slices.Clip(asked), g.again[idx]...)
	}
	for k, m := range asked {
		sent, err := g.tryOwner(k, m, idx, id, &miss) // k > 0 past the primary: a one-chunk Fetch
		if err != nil {
			return err
		}
		if sent {
			g.c.m.GetBy[metrics.GetHit].Inc()
			return nil
		}
	}
	// An owner that left the ring is not asked; it may be the holder, and
	// the reason should say so. One declared dead may come back with it.
	died := false
	for _, d := range g.c.departed.owners(g.name, g.keys[idx], g.r, g.c.cfg.Now()) {
		if !slices.Contains(miss.nodes, d.ID) {
			miss.add(d.ID, "an owner until it left the ring %s ago (down?): not asked", d.Ago.Round(time.Second))
			died = died || d.Died
		}
	}
	for _, id := range g.c.departed.unrecorded(g.ring, g.name, g.keys[idx], g.r) {
		if !slices.Contains(miss.nodes, id) {
			miss.add(id, "an owner in a ring of a moment ago or since (down, or back?): not asked")
			died = true // not asked, and it may hold the chunk
		}
	}
	// Not found only when every member that may hold the chunk said it
	// does not: one that did not answer, or died, may hold it (unavailable).
	// This is the one place that decides which.
	me, result := &MissError{Reason: miss.String()}, metrics.GetMiss
	if miss.unavailable > 0 || died {
		me.Unavailable, result = true, metrics.GetUnavailable
	}
	if miss.badSum {
		result = metrics.GetChecksumError
	}
	g.c.m.GetBy[result].Inc()
	return g.sink.Miss(idx, me)
}

// tryOwner asks the owner at position k of the chunk's owners for it (this
// node's store, the primary's Fetch stream, or a one-chunk Fetch of a
// fallback) and forwards it to the engine if found with good bytes. It
// reports whether it sent the chunk; why not goes into miss. err is the
// engine's stream failing.
func (g *getTx) tryOwner(k int, m ring.Member, idx uint32, id store.ID, miss *chunkMiss) (sent bool, err error) {
	c := g.c
	if m.ID == c.cfg.Self {
		size, readErr, err := c.local.Send(g.ns, id, idx, &kvringv1.NodeRef{NodeId: m.ID, GrpcAddr: m.Addr}, g.send)
		if err != nil || size > 0 {
			c.m.GetBytes.Add(float64(size))
			return err == nil, err
		}
		miss.badSum = miss.badSum || errors.Is(readErr, store.ErrChecksum)
		miss.add(m.ID, "not held")
		return false, nil
	}
	h, data, sum, ferr := g.fetch(k, m, id)
	switch {
	case ferr != nil:
		miss.unavailable++
		miss.add(m.ID, "%v", ferr)
		return false, nil
	case h.GetStatus() != kvringv1.ReadStatus_READ_STATUS_FOUND:
		miss.add(m.ID, "%s", h.GetReason())
		return false, nil
	case sum != h.GetChunk().GetCrc32C():
		miss.badSum = true
		miss.add(m.ID, "bytes failed their checksum")
		return false, nil
	}
	h.Index = idx
	h.Holder = &kvringv1.NodeRef{NodeId: m.ID, GrpcAddr: m.Addr}
	if err := g.sink.Found(h); err != nil {
		return false, err
	}
	if err := g.sink.Data(idx, 0, data); err != nil {
		return false, err
	}
	c.m.GetBytes.Add(float64(len(data)))
	return true, nil
}

// fetch reads chunk id from remote owner m: from its Fetch stream when m is
// the primary (k == 0), else with a one-chunk Fetch. The outcome is noted for
// the outage log.
func (g *getTx) fetch(k int, m ring.Member, id store.ID) (*kvringv1.ChunkHeader, []byte, uint32, error) {
	if k > 0 {
		h, data, sum, err := g.c.fetchOne(g.ctx, m, g.ref, id)
		g.c.peers.note(g.ctx, m, err)
		return h, data, sum, err
	}
	fs := g.streams[m.ID]
	wasBroken := fs.broken != nil
	h, data, sum, err := fs.next(id)
	if err != nil && !wasBroken {
		g.c.peers.note(g.ctx, m, err) // once per stream; success is noted at the end
	}
	return h, data, sum, err
}

// spreadOrder is the order a get of a spread group's chunk tries members
// in: the pick, the owners, then the other spread members (a lookup may
// have pinned the chunk on any of them).
func spreadOrder(pk spreadPick, owners []ring.Member) []ring.Member {
	out := append([]ring.Member{pk.m}, withoutMember(owners, pk.m)...)
	for _, m := range pk.set {
		if !slices.ContainsFunc(out, func(o ring.Member) bool { return o.ID == m.ID }) {
			out = append(out, m)
		}
	}
	return out
}

// nonOwners returns the members that are not in owners.
func nonOwners(members, owners []ring.Member) []ring.Member {
	var out []ring.Member
	for _, m := range members {
		if !slices.ContainsFunc(owners, func(o ring.Member) bool { return o.ID == m.ID }) {
			out = append(out, m)
		}
	}
	return out
}
