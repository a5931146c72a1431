package node

import (
	"context"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/spread"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// spreadCluster is an 8-node cluster whose nodes spread a group looked up 4
// times in a window to 4 members, a grouped namespace's prompt of one
// group of 8 stored on it, and a client coordinated by a node outside the
// first group's spread set (so that every Has it causes is a peer call).
type spreadCluster struct {
	tc     *testCluster
	c      *client.Client
	chunks []client.Chunk
	ids    []client.ChunkID
	set    []ring.Member // the first group's spread set: its key's first 4 members
	ns     string        // store name of the namespace
}

const spreadK, spreadWidth = 8, 4

func newSpreadCluster(t *testing.T) *spreadCluster {
	t.Helper()
	tc := newTestClusterWith(t, 8, 16<<20, func(_ int, cfg *Config) {
		cfg.Spread = SpreadConfig{Threshold: 4, Width: spreadWidth, TTL: time.Minute}
	})
	sc := &spreadCluster{tc: tc, chunks: promptChunks(7, spreadK, spreadK)}
	sc.ids = chunkIDs(sc.chunks)
	key := sc.chunks[0].Group
	sc.set = tc.Ring().SpreadSet(groupedNS, key[:], spreadWidth)
	var outside *testNode
	for _, nd := range tc.nodes {
		if !inMembers(sc.set, nd.id) {
			outside = nd
			break
		}
	}
	sc.c = groupedClient(t, outside.addr, spreadK)
	res, err := sc.c.Put(context.Background(), sc.chunks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != client.Stored {
			t.Fatalf("put %d: %+v", i, r)
		}
	}
	fp, err := sc.c.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sc.ns = namespace.StoreName(groupedNS, fp)
	return sc
}

func inMembers(ms []ring.Member, id string) bool {
	for _, m := range ms {
		if m.ID == id {
			return true
		}
	}
	return false
}

func (sc *spreadCluster) node(id string) *testNode {
	for _, nd := range sc.tc.nodes {
		if nd.id == id {
			return nd
		}
	}
	return nil
}

// lookups runs n lookups of the whole prompt and checks that each counts
// every chunk.
func (sc *spreadCluster) lookups(t *testing.T, n int) {
	t.Helper()
	for range n {
		lr, err := sc.c.Lookup(context.Background(), sc.ids, 0)
		if err != nil || lr.Held != len(sc.ids) {
			t.Fatalf("lookup: %+v %v, want all %d held", lr, err, len(sc.ids))
		}
	}
}

// runSpreaders runs every node's spreader on what it has queued.
func (sc *spreadCluster) runSpreaders() int {
	n := 0
	for _, nd := range sc.tc.nodes {
		n += nd.svc.Spreader.RunOnce(context.Background())
	}
	return n
}

// hasCalls is how many Has calls each member of the spread set served.
func (sc *spreadCluster) hasCalls(t *testing.T) []uint64 {
	t.Helper()
	out := make([]uint64, len(sc.set))
	for i, m := range sc.set {
		out[i], _ = histogramOf(t, sc.node(m.ID), "kvring_peer_request_duration_seconds", "op", "has")
	}
	return out
}

// TestAHotGroupIsSpreadAndItsLookupsReachEverySpreadMember: a group looked
// up past the threshold is copied by its primary owner to the next members
// of its key's ring order, and later lookups of it are answered by all of
// them instead of by the owner alone, each still counting every chunk.
func TestAHotGroupIsSpreadAndItsLookupsReachEverySpreadMember(t *testing.T) {
	t.Parallel()
	sc := newSpreadCluster(t)
	before := sc.hasCalls(t)
	sc.lookups(t, 4)
	after := sc.hasCalls(t)
	for i := 1; i < len(sc.set); i++ {
		if after[i] != before[i] {
			t.Fatalf("before spreading, member %d of the spread set served %d Has calls: want only the owner asked", i, after[i]-before[i])
		}
	}
	if n := sc.runSpreaders(); n == 0 {
		t.Fatal("no group was found hot after 4 lookups (threshold 4)")
	}
	for _, m := range sc.set {
		for i := range spreadK {
			if !sc.node(m.ID).st.Contains(sc.ns, store.ID(sc.ids[i])) {
				t.Fatalf("spread member %s lacks chunk %d of the hot group", m.ID, i)
			}
		}
	}
	if got := sc.tc.nodes[0].svc.Spread.Width(spreadKey(sc, 0)); got != 0 && got != spreadWidth {
		t.Fatalf("node 0 knows the group spread %d wide, want %d or unknown", got, spreadWidth)
	}
	start := sc.hasCalls(t)
	sc.lookups(t, 200)
	end := sc.hasCalls(t)
	var total uint64
	for i := range sc.set {
		served := end[i] - start[i]
		if served == 0 {
			t.Fatalf("spread member %d (%s) served no Has call of 200 lookups: %v", i, sc.set[i].ID, diff(end, start))
		}
		total += served
	}
	if owner := end[0] - start[0]; owner*2 > total {
		t.Fatalf("the owner served %d of %d Has calls after spreading: want the load shared by %d members", owner, total, spreadWidth)
	}
}

func spreadKey(sc *spreadCluster, i int) spread.Key {
	return spread.Key{NS: sc.ns, Place: store.ID(sc.chunks[i].Group)}
}

func diff(a, b []uint64) []uint64 {
	out := make([]uint64, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}

// TestASpreadMemberThatLostItsCopiesIsNoMiss: spread copies may be evicted
// at any time; a lookup that picks such a member asks the owners for what
// it lacks, so it still counts every chunk, and a get still returns every
// chunk byte-exact.
func TestASpreadMemberThatLostItsCopiesIsNoMiss(t *testing.T) {
	t.Parallel()
	sc := newSpreadCluster(t)
	sc.lookups(t, 4)
	if sc.runSpreaders() == 0 {
		t.Fatal("no group was found hot")
	}
	sc.lookups(t, 1) // the coordinator learns that the group is spread
	for _, m := range sc.set[1:] {
		for i := range spreadK {
			if err := sc.node(m.ID).st.Evict(sc.ns, store.ID(sc.ids[i])); err != nil {
				t.Fatal(err)
			}
		}
	}
	sc.lookups(t, 40)
	got, err := sc.c.Get(context.Background(), sc.ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !g.Found || string(g.Data) != string(sc.chunks[i].Data) {
			t.Fatalf("get %d: found %v (%s)", i, g.Found, g.Reason)
		}
	}
}

// TestAGetOfASpreadGroupIsServedBySpreadMembers: once a group is spread,
// gets of its chunks are read from its spread members too, not only from
// its owner, byte-exact.
func TestAGetOfASpreadGroupIsServedBySpreadMembers(t *testing.T) {
	t.Parallel()
	sc := newSpreadCluster(t)
	sc.lookups(t, 4)
	if sc.runSpreaders() == 0 {
		t.Fatal("no group was found hot")
	}
	sc.lookups(t, 1)
	fetches := func() []uint64 {
		out := make([]uint64, len(sc.set))
		for i, m := range sc.set {
			out[i], _ = histogramOf(t, sc.node(m.ID), "kvring_peer_request_duration_seconds", "op", "fetch")
		}
		return out
	}
	start := fetches()
	for range 40 {
		got, err := sc.c.Get(context.Background(), sc.ids)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			if !g.Found || string(g.Data) != string(sc.chunks[i].Data) {
				t.Fatalf("get %d: found %v (%s)", i, g.Found, g.Reason)
			}
		}
	}
	served := diff(fetches(), start)
	others := uint64(0)
	for _, n := range served[1:] {
		others += n
	}
	if others == 0 || served[0] == 40 {
		t.Fatalf("fetches per spread member %v: want the gets shared", served)
	}
}

// TestAnEngineThatRoutesSpreadsItsLookupsOfAHotGroupOverTheSpreadSet: an
// SDK that routes calls sends a lookup to the primary owner of its first
// group; once a lookup reported that group spread, it sends later lookups
// to members of the spread set, so the set's members coordinate them, not
// the primary alone, and every lookup still counts every chunk.
func TestAnEngineThatRoutesSpreadsItsLookupsOfAHotGroupOverTheSpreadSet(t *testing.T) {
	t.Parallel()
	sc := newSpreadCluster(t)
	routed := testClientWith(t, client.Config{
		Conn:      client.ConnConfig{Seeds: []string{sc.node(sc.set[0].ID).addr}},
		Namespace: groupedNS,
		Schema:    client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16, ChunksPerGroup: spreadK},
		Logger:    quietLogger(),
	})
	sc.lookups(t, 4)
	if sc.runSpreaders() == 0 {
		t.Fatal("no group was found hot")
	}
	coordinated := func() []float64 {
		out := make([]float64, len(sc.set))
		for i, m := range sc.set {
			out[i] = counterSum(t, sc.node(m.ID), "kvring_lookups_total")
		}
		return out
	}
	if err := routed.RefreshRouting(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := routed.Lookup(context.Background(), sc.ids, 0); err != nil { // learns that the group is spread
		t.Fatal(err)
	}
	start := coordinated()
	for range 200 {
		lr, err := routed.Lookup(context.Background(), sc.ids, 0)
		if err != nil || lr.Held != len(sc.ids) {
			t.Fatalf("lookup: %+v %v", lr, err)
		}
	}
	end := coordinated()
	for i := range sc.set {
		if end[i]-start[i] == 0 {
			t.Fatalf("spread member %d coordinated none of 200 routed lookups: start %v end %v", i, start, end)
		}
	}
}
