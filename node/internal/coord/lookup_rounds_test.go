package coord_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kvring/kvring/node/internal/clustertest"
	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/moves"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/owner"
	"github.com/kvring/kvring/node/internal/spread"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// TestAReplicatedLookupAsksTheOtherOwnerOnlyForWhatThePrimaryLacks: with
// replication 2 a lookup asks a chunk's primary owner, and its second owner
// only when the primary does not hold the chunk (evicted there): every chunk
// either owner holds is counted, and the second owner of a chunk its primary
// holds is never asked.
func TestAReplicatedLookupAsksTheOtherOwnerOnlyForWhatThePrimaryLacks(t *testing.T) {
	t.Parallel()
	c, log, ref := startMoving(t, 6, 2)
	var chunks []clustertest.Chunk
	for n := range uint64(60) {
		chunks = append(chunks, clustertest.ChunkOf(3000+n, 512))
	}
	put(t, c, 0, ref, chunks...)
	ns := namespace.StoreName(ref.GetName(), ref.GetFingerprint())
	lacking := map[string]bool{}
	for k, ch := range chunks {
		if k%3 == 0 {
			primary := c.NodeOf(c.Ring().Owners("moves/ns", ch.ID, 2)[0].ID)
			if err := primary.Store.Evict(ns, store.ID(ch.ID)); err != nil {
				t.Fatal(err)
			}
			lacking[string(ch.ID)] = true
		}
	}
	reader := c.Nodes[1]
	log.reset()
	if held := lookupEach(t, c, 1, ref, chunks); held != len(chunks) {
		t.Fatalf("lookups counted %d of %d chunks, each held by one owner at least", held, len(chunks))
	}
	secondAsked := 0
	for _, ch := range chunks {
		owners := c.Ring().Owners("moves/ns", ch.ID, 2)
		second := owners[1].ID
		if second == reader.ID {
			continue // asked in process: not logged
		}
		asked := slices.Contains(log.nodesAsked(ch.ID), second)
		if asked && !lacking[string(ch.ID)] {
			t.Fatalf("chunk %x: its second owner was asked although its primary holds it", ch.ID[:4])
		}
		if asked {
			secondAsked++
		}
	}
	if secondAsked == 0 {
		t.Fatal("no second owner was asked about a chunk its primary lacks: the test proves nothing")
	}
}

// TestASpreadGroupAHandOffSummaryNamesIsStillReadFromItsSpreadSet: while a
// member's hand-off summary names the partition of a spread group, a
// lookup of the group asks that member too, and still reads the group from
// one member of its spread set (not from its owners alone); the member's
// answer that it knows of no spread (it is outside the set) does not end
// what the coordinator knows of the spread.
func TestASpreadGroupAHandOffSummaryNamesIsStillReadFromItsSpreadSet(t *testing.T) {
	t.Parallel()
	const nodes, width = 8, 4
	tables := make([]*spread.Table, nodes)
	for i := range tables {
		tables[i] = spread.NewTable(spread.TableConfig{})
	}
	log := &askLog{asked: map[string]map[string]bool{}}
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: nodes, ReplicationFactor: 2, Wrap: log.wrap,
		Coord: func(i int, cfg *coord.Config) { cfg.Spread = tables[i] },
		Owner: func(i int, cfg *owner.Config) { cfg.Spread = tables[i] }})
	for _, n := range c.Nodes {
		log.nodes = append(log.nodes, n.ID)
	}
	schema := &kvringv1.NamespaceSchema{Model: "m", Dtype: "bf16", TokensPerChunk: 16, ChunksPerGroup: 8}
	ref := c.RegisterSchema(t, "moves/spread", schema, 1, 1)
	var chunks []clustertest.Chunk
	for n := range uint64(8) {
		chunks = append(chunks, clustertest.ChunkOf(4000+n, 512))
	}
	key := chunks[0].ID
	groups := []*kvringv1.GroupRun{{Key: key, Count: uint32(len(chunks))}}
	if _, err := clustertest.Put(context.Background(), c.Cache(t, 0), ref, chunks, clustertest.PutOptions{Groups: groups}); err != nil {
		t.Fatal(err)
	}
	rg := c.Ring()
	set := rg.SpreadSet("moves/spread", key, width)
	k := spread.Key{NS: namespace.StoreName(ref.GetName(), ref.GetFingerprint()), Place: store.ID(key)}
	inSet := func(id string) bool { return slices.ContainsFunc(set, func(m ring.Member) bool { return m.ID == id }) }
	for i, n := range c.Nodes {
		if inSet(n.ID) {
			tables[i].Hold(k, width, time.Now().Add(time.Minute))
		}
	}
	reader, mover := -1, -1
	for i, n := range c.Nodes {
		switch {
		case inSet(n.ID):
		case reader < 0:
			reader = i
		case mover < 0:
			mover = i
		}
	}
	tables[reader].Hint(k, width, time.Now().Add(time.Minute)) // a holder answered it lately
	p := rg.Partition("moves/spread", key)
	entries := summaries(rg, moves.Summary{Ring: moves.RingHash(rg)})
	for i := range entries {
		if entries[i].Member.ID == c.Nodes[mover].ID {
			entries[i].Summary = &moves.Summary{Ring: moves.RingHash(rg), Ranges: []moves.Range{{Lo: p, Hi: p}}}
		}
	}
	c.SetMoves(moves.NewView(rg, knowing(), entries, time.Time{}))

	cache := c.Cache(t, reader)
	for range 30 {
		lr, err := cache.Lookup(context.Background(), &kvringv1.LookupRequest{Namespace: ref, Ids: clustertest.IDs(chunks), Groups: groups})
		if err != nil || lr.GetHeld() != uint32(len(chunks)) {
			t.Fatalf("lookup: %v %v, want all %d held", lr, err, len(chunks))
		}
	}
	asked := log.nodesAsked(key)
	if !slices.Contains(asked, c.Nodes[mover].ID) {
		t.Fatalf("the member whose summary names the group's partition was not asked (asked %v)", asked)
	}
	spreadAsked := false
	for _, m := range set[1:] {
		spreadAsked = spreadAsked || slices.Contains(asked, m.ID)
	}
	if !spreadAsked {
		t.Fatalf("30 lookups of a spread group asked none of its spread members besides its owner (asked %v, set %v)", asked, idsOf(set))
	}
	if w := tables[reader].Width(k); w != width {
		t.Fatalf("after the lookups the coordinator knows the group %d wide, want %d", w, width)
	}
}
