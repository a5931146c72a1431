package node

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
)

// Tests of the SDK's routing (client/route.go) against real coordinators: the
// client package cannot import node, so they live here.

// routedClient is testClient with routing on and a ring view fetched.
func routedClient(t *testing.T, addr string, rf, minR uint32, change func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{
		Conn:              client.ConnConfig{Seeds: []string{addr}},
		Namespace:         "test/model",
		Schema:            client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16},
		ReplicationFactor: rf, MinReplicas: minR,
		CallTimeout: testCallTimeout,
		Logger:      quietLogger(),
	}
	if change != nil {
		change(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitFor(t, "the client to connect", func() bool { return c.State().Status == client.ConnConnected })
	if _, err := c.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !cfg.DisableRouting {
		if err := c.RefreshRouting(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, what, 10*time.Second, cond)
}

// counterSum is the sum over every label of a counter family the node
// exports (0 when it has no series yet).
func counterSum(t *testing.T, nd *testNode, family string) float64 {
	t.Helper()
	mfs, err := nd.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == family {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// coordinated returns how many put and get chunks each node coordinated.
func (tc *testCluster) coordinated(t *testing.T) (puts, gets map[string]float64) {
	t.Helper()
	puts, gets = map[string]float64{}, map[string]float64{}
	for _, nd := range tc.nodes {
		puts[nd.id] = counterSum(t, nd, "kvring_put_chunks_total")
		gets[nd.id] = counterSum(t, nd, "kvring_get_chunks_total")
	}
	return puts, gets
}

// primaries counts the chunks of each primary owner under the cluster's ring.
func (tc *testCluster) primaries(t *testing.T, ids []client.ChunkID) (map[string]float64, []string) {
	t.Helper()
	count, of := map[string]float64{}, make([]string, len(ids))
	for i, id := range ids {
		p, err := tc.Ring().Primary("test/model", id[:])
		if err != nil {
			t.Fatal(err)
		}
		count[p.ID]++
		of[i] = p.ID
	}
	return count, of
}

func idsOf(chunks []client.Chunk) []client.ChunkID {
	ids := make([]client.ChunkID, len(chunks))
	for i := range chunks {
		ids[i] = chunks[i].ID
	}
	return ids
}

// TestRoutedCallsReachThePrimaryOwnerAndKeepTheCallersOrder: with a ring
// view, each node coordinates exactly the puts and gets of the chunks it is
// primary for (no second hop), and results come back in the caller's order,
// duplicates and misses included. With routing disabled the connected node
// coordinates everything.
func TestRoutedCallsReachThePrimaryOwnerAndKeepTheCallersOrder(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	c := routedClient(t, tc.nodes[0].addr, 1, 1, nil)
	if rs := c.Routing(); !rs.Enabled || len(rs.Members) != 3 || rs.Epoch != 1 || rs.From.ID != tc.nodes[0].id {
		t.Fatalf("routing state %+v, want the 3-member view of epoch 1 from %s", rs, tc.nodes[0].id)
	}
	ctx := context.Background()
	var chunks []client.Chunk
	for i := uint64(0); i < 30; i++ {
		chunks = append(chunks, chunkOf(1000+i, 10_000+int(i)*997))
	}
	ids := idsOf(chunks)
	want, owner := tc.primaries(t, ids)
	for _, nd := range tc.nodes {
		if want[nd.id] == 0 {
			t.Fatalf("node %s is primary for none of the chunks; the test proves nothing", nd.id)
		}
	}

	res, err := c.Put(ctx, chunks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.ID != chunks[i].ID || r.Status != client.Stored || len(r.Holders) != 1 || r.Holders[0].ID != owner[i] {
			t.Fatalf("chunk %d: %+v, want stored on its primary %s", i, r, owner[i])
		}
	}
	puts, _ := tc.coordinated(t)
	for _, nd := range tc.nodes {
		if puts[nd.id] != want[nd.id] {
			t.Fatalf("node %s coordinated %v puts, want the %v chunks it is primary for", nd.id, puts[nd.id], want[nd.id])
		}
	}

	// Reversed, with a duplicate and a chunk nobody holds.
	missing := chunkOf(9999, 10)
	order := append(slices.Clone(ids), ids[3], missing.ID)
	slices.Reverse(order)
	got, err := c.Get(ctx, order)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(order) {
		t.Fatalf("%d results for %d ids", len(got), len(order))
	}
	eachHeld(t, got, order, ids, missing.ID, func(k, i int, g client.GetResult) {
		if !g.Found || !bytes.Equal(g.Data, chunks[i].Data) || g.Holder.ID != owner[i] {
			t.Fatalf("result %d (chunk %d): found=%v holder=%s reason=%q", k, i, g.Found, g.Holder.ID, g.Reason)
		}
	})
	_, gets := tc.coordinated(t)
	for _, nd := range tc.nodes {
		w := want[nd.id]
		if nd.id == owner[3] {
			w++ // the duplicate
		}
		if nd.id == tc.nodes[0].id {
			w++ // the missing chunk: asked of its owner, then of the connected node again
		}
		if p, err := tc.Ring().Primary("test/model", missing.ID[:]); err == nil && p.ID == nd.id && p.ID != tc.nodes[0].id {
			w++
		}
		if gets[nd.id] != w {
			t.Fatalf("node %s coordinated %v get chunks, want %v", nd.id, gets[nd.id], w)
		}
	}

	// The same calls without routing: the connected node coordinates all.
	plain := routedClient(t, tc.nodes[0].addr, 1, 1, func(cfg *client.Config) { cfg.DisableRouting = true })
	if rs := plain.Routing(); rs.Enabled || len(rs.Members) != 0 {
		t.Fatalf("routing state with DisableRouting: %+v", rs)
	}
	if err := plain.RefreshRouting(ctx); err == nil {
		t.Fatal("RefreshRouting with DisableRouting succeeded")
	}
	more := []client.Chunk{chunkOf(2000, 5000), chunkOf(2001, 5000), chunkOf(2002, 5000), chunkOf(2003, 5000)}
	before, _ := tc.coordinated(t)
	if res, err := plain.Put(ctx, more); err != nil || len(res) != len(more) {
		t.Fatal(err, res)
	}
	after, _ := tc.coordinated(t)
	for _, nd := range tc.nodes {
		w := before[nd.id]
		if nd == tc.nodes[0] {
			w += float64(len(more))
		}
		if after[nd.id] != w {
			t.Fatalf("without routing node %s coordinated %v puts, want %v", nd.id, after[nd.id]-before[nd.id], w-before[nd.id])
		}
	}
}

// TestRoutedPutFallsBackWhenAnOwnerIsDown: an owner whose address is dead
// (still in the ring) gets its share sent through the connected node, which
// stores it degraded on the next owner; nothing is reported held by the dead
// node, and everything reads back.
func TestRoutedPutFallsBackWhenAnOwnerIsDown(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	c := routedClient(t, tc.nodes[0].addr, 2, 1, nil)
	dead := tc.nodes[2]
	dead.stop()
	ctx := context.Background()
	var chunks []client.Chunk
	for i := uint64(0); i < 24; i++ {
		chunks = append(chunks, chunkOf(3000+i, 20_000))
	}
	want, owner := tc.primaries(t, idsOf(chunks))
	if want[dead.id] == 0 {
		t.Fatal("the dead node is primary for none of the chunks; the test proves nothing")
	}
	before, _ := tc.coordinated(t)
	res, err := c.Put(ctx, chunks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.ID != chunks[i].ID || r.Status != client.Stored || len(r.Holders) == 0 {
			t.Fatalf("chunk %d: %+v, want stored", i, r)
		}
		for _, h := range r.Holders {
			if h.ID == dead.id {
				t.Fatalf("chunk %d reported held by the dead node", i)
			}
		}
		if owner[i] == dead.id && (r.Degraded || len(r.Holders) != 2) {
			t.Fatalf("chunk %d of the dead primary: %+v, want stored on two live nodes (one in its place)", i, r)
		}
	}
	after, _ := tc.coordinated(t)
	if got, w := after[tc.nodes[0].id]-before[tc.nodes[0].id], want[tc.nodes[0].id]+want[dead.id]; got != w {
		t.Fatalf("the connected node coordinated %v puts, want its own %v and the dead owner's %v", got, want[tc.nodes[0].id], want[dead.id])
	}
	got, err := c.Get(ctx, idsOf(chunks))
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !g.Found || !bytes.Equal(g.Data, chunks[i].Data) {
			t.Fatalf("chunk %d: found=%v reason=%q", i, g.Found, g.Reason)
		}
	}
}

// hangingNode accepts every Cache and Peer call and never answers: a node
// whose process hangs with its connections open.
type hangingNode struct {
	kvringv1.UnimplementedCacheServer
	stuckPeer
}

func (hangingNode) Put(s grpc.BidiStreamingServer[kvringv1.PutRequest, kvringv1.PutResponse]) error {
	<-s.Context().Done()
	return s.Context().Err()
}

func (hangingNode) Get(_ *kvringv1.GetRequest, s grpc.ServerStreamingServer[kvringv1.GetResponse]) error {
	<-s.Context().Done()
	return s.Context().Err()
}

// TestRoutingSkipsAnOwnerThatHangs: an owner that accepts the call but never
// answers costs the client the owner answer timeout (Conn.DialTimeout +
// Conn.ProbeTimeout), then its share goes through the connected node, which
// gives up on it after PeerTimeout. The hung owner never answers, so the
// calls' deadline only bounds the test: were it not skipped, they would
// fail however long the deadline.
func TestRoutingSkipsAnOwnerThatHangs(t *testing.T) {
	t.Parallel()
	tc := newTestClusterWith(t, 2, 64<<20, func(_ int, cfg *Config) { cfg.PeerTimeout = time.Second })
	hung := ring.Member{ID: "hung", Addr: serveFake(t, func(gs *grpc.Server) {
		kvringv1.RegisterCacheServer(gs, hangingNode{})
		kvringv1.RegisterPeerServer(gs, hangingNode{})
	})}
	tc.useMembers(t, append(tc.Ring().Members(), hung))
	c := routedClient(t, tc.nodes[0].addr, 2, 1, func(cfg *client.Config) {
		cfg.Conn.DialTimeout, cfg.Conn.ProbeTimeout = time.Second, 500*time.Millisecond
	})
	if n := len(c.Routing().Members); n != 3 {
		t.Fatalf("the view has %d members, want 3", n)
	}
	var chunks []client.Chunk
	// Node ids are random, so placement is too: 48 chunks leave the hanging
	// node without one in (2/3)^48 of runs, where 12 did in 1 of 130.
	for i := uint64(0); i < 48; i++ {
		chunks = append(chunks, chunkOf(4000+i, 20_000))
	}
	want, _ := tc.primaries(t, idsOf(chunks))
	if want[hung.ID] == 0 {
		t.Fatal("the hanging node is primary for none of the chunks; the test proves nothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Put(ctx, chunks)
	if err != nil {
		t.Fatalf("put with a hanging owner: %v", err)
	}
	for i, r := range res {
		// already_held: a share resent through the connected node after a
		// real owner was slow to answer (a loaded machine) finds it stored.
		if !r.Status.Held() || slices.ContainsFunc(r.Holders, func(h client.Node) bool { return h.ID == hung.ID }) {
			t.Fatalf("chunk %d: %+v", i, r)
		}
	}
	got, err := c.Get(ctx, idsOf(chunks))
	if err != nil {
		t.Fatalf("get with a hanging owner: %v", err)
	}
	for i, g := range got {
		if !g.Found || !bytes.Equal(g.Data, chunks[i].Data) {
			t.Fatalf("chunk %d: found=%v reason=%q", i, g.Found, g.Reason)
		}
	}
}

// TestRoutingFollowsEpochChanges: when the connected node's replies carry a
// new epoch, the client fetches the ring view again by itself, stops
// routing to a node that left and routes to it again once it is back.
func TestRoutingFollowsEpochChanges(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	c := routedClient(t, tc.nodes[0].addr, 1, 1, nil)
	ctx := context.Background()
	all := tc.Ring().Members()
	gone := tc.nodes[2]
	rcfg := tc.Ring().Config()
	setRing := func(epoch uint64, members []ring.Member) {
		r, err := ring.New(members, epoch, rcfg)
		if err != nil {
			t.Fatal(err)
		}
		tc.Store(r)
	}
	// Traffic to every node first, so that the client has a connection to each.
	var seq uint64 = 5000
	put := func(n int) []client.Chunk {
		var chunks []client.Chunk
		for range n {
			chunks = append(chunks, chunkOf(seq, 4000))
			seq++
		}
		res, err := c.Put(ctx, chunks)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if !r.Status.Held() {
				t.Fatalf("chunk %d: %+v", i, r)
			}
		}
		return chunks
	}
	put(12)

	setRing(2, slices.DeleteFunc(slices.Clone(all), func(m ring.Member) bool { return m.ID == gone.id }))
	if _, err := c.Lookup(ctx, []client.ChunkID{chunkOf(1, 1).ID}, 0); err != nil { // the reply carries epoch 2
		t.Fatal(err)
	}
	waitFor(t, "the view of epoch 2", func() bool { return c.Routing().Epoch == 2 })
	if rs := c.Routing(); len(rs.Members) != 2 || slices.ContainsFunc(rs.Members, func(n client.Node) bool { return n.ID == gone.id }) {
		t.Fatalf("view of epoch 2: %+v, want the two remaining members", rs)
	}
	before, _ := tc.coordinated(t)
	put(24)
	after, _ := tc.coordinated(t)
	if after[gone.id] != before[gone.id] {
		t.Fatalf("the node that left the ring coordinated %v puts", after[gone.id]-before[gone.id])
	}

	setRing(3, all)
	if _, err := c.Lookup(ctx, []client.ChunkID{chunkOf(1, 1).ID}, 0); err != nil { // the reply carries epoch 3
		t.Fatal(err)
	}
	waitFor(t, "the view of epoch 3", func() bool { return c.Routing().Epoch == 3 })
	before, _ = tc.coordinated(t)
	chunks := put(24)
	after, _ = tc.coordinated(t)
	want, _ := tc.primaries(t, idsOf(chunks))
	if got := after[gone.id] - before[gone.id]; got != want[gone.id] || got == 0 {
		t.Fatalf("the node back in the ring coordinated %v puts, want the %v it is primary for", got, want[gone.id])
	}
}

// TestRoutedBadInputNamesTheCallersPosition: a routed put with bad input
// fails as a whole with InvalidArgument, naming the chunk by its position
// in the caller's batch, not in the owner's share.
func TestRoutedBadInputNamesTheCallersPosition(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	c := routedClient(t, tc.nodes[0].addr, 1, 1, nil)
	var chunks []client.Chunk
	for i := uint64(0); i < 12; i++ {
		chunks = append(chunks, chunkOf(6000+i, 1000))
	}
	chunks[9] = chunks[4]
	_, err := c.Put(context.Background(), chunks)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "chunks[9].id is the same as chunks[4].id") {
		t.Fatalf("duplicate ids: %v, want InvalidArgument naming chunks[9] and chunks[4]", err)
	}
}

// TestRoutedLookupGoesToTheFirstGroupsOwner: with a ring view, a lookup goes
// straight to the primary owner of its first id's placement key, which
// answers it from its own store; a lease it grants is released there.
func TestRoutedLookupGoesToTheFirstGroupsOwner(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 16<<20)
	c := routedClient(t, tc.nodes[0].addr, 1, 1, func(cfg *client.Config) { cfg.Schema.ChunksPerGroup = 32 })
	var chunks []client.Chunk
	var owner *testNode
	for seed := uint64(1); owner == nil || owner == tc.nodes[0]; seed++ {
		chunks = promptChunks(seed, 32, 32)
		p, err := tc.Ring().Primary("test/model", chunks[0].ID[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, nd := range tc.nodes {
			if nd.id == p.ID {
				owner = nd
			}
		}
	}
	if _, err := c.Put(context.Background(), chunks); err != nil {
		t.Fatal(err)
	}
	lookups := func(nd *testNode) float64 { return counterSum(t, nd, "kvring_lookups_total") }
	viaBefore, ownerBefore := lookups(tc.nodes[0]), lookups(owner)
	lr, err := c.Lookup(context.Background(), chunkIDs(chunks), time.Minute)
	if err != nil || lr.Held != 32 || lr.Lease == 0 {
		t.Fatalf("lookup: %+v %v", lr, err)
	}
	if lookups(owner) != ownerBefore+1 || lookups(tc.nodes[0]) != viaBefore {
		t.Fatalf("the owner answered %v lookups and the connected node %v, want 1 and 0",
			lookups(owner)-ownerBefore, lookups(tc.nodes[0])-viaBefore)
	}
	if n := owner.st.Stats().PinnedChunks; n != 32 {
		t.Fatalf("%d chunks pinned on the owner, want 32", n)
	}
	if err := c.ReleaseLease(context.Background(), lr.Lease); err != nil {
		t.Fatal(err)
	}
	if n := owner.st.Stats().PinnedChunks; n != 0 {
		t.Fatalf("%d chunks still pinned after the release", n)
	}
}

// TestARoutedGetIntoFillsTheCallersBuffersInTheirOrder: GetInto over a
// routed client splits the batch by primary owner like Get, and every share
// writes into the caller's buffers at the caller's positions (a reversed
// order with a duplicate and a miss), each found chunk's Data a prefix of
// its own buffer.
func TestARoutedGetIntoFillsTheCallersBuffersInTheirOrder(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	c := routedClient(t, tc.nodes[0].addr, 1, 1, nil)
	ctx := context.Background()
	var chunks []client.Chunk
	for i := uint64(0); i < 24; i++ {
		chunks = append(chunks, chunkOf(2000+i, 10_000+int(i)*997))
	}
	if _, err := c.Put(ctx, chunks); err != nil {
		t.Fatal(err)
	}
	ids := idsOf(chunks)
	want, _ := tc.primaries(t, ids)
	if len(want) < 2 {
		t.Fatalf("the chunks have %d primaries; the test needs shares on several owners", len(want))
	}
	missing := chunkOf(9999, 10)
	order := append(slices.Clone(ids), ids[5], missing.ID)
	slices.Reverse(order)
	bufs := make([][]byte, len(order))
	for k := range bufs {
		bufs[k] = make([]byte, 64<<10)
	}
	got, err := c.GetInto(ctx, order, bufs)
	if err != nil {
		t.Fatal(err)
	}
	eachHeld(t, got, order, ids, missing.ID, func(k, i int, g client.GetResult) {
		if !g.Found || !bytes.Equal(g.Data, chunks[i].Data) || &g.Data[0] != &bufs[k][0] {
			t.Fatalf("result %d (chunk %d): found=%v, %d bytes, reason %q; want its bytes in buffer %d", k, i, g.Found, len(g.Data), g.Reason, k)
		}
		if !bytes.Equal(bufs[k][:len(g.Data)], chunks[i].Data) {
			t.Fatalf("buffer %d does not hold chunk %d", k, i)
		}
	})
}

// eachHeld checks that result k of got is for order[k] and that missing
// (held by nobody) was not found, and calls check for every other result
// with its position i in ids.
func eachHeld(t *testing.T, got []client.GetResult, order, ids []client.ChunkID, missing client.ChunkID, check func(k, i int, g client.GetResult)) {
	t.Helper()
	for k, g := range got {
		if g.ID != order[k] {
			t.Fatalf("result %d is for %s, want %s", k, g.ID, order[k])
		}
		if order[k] == missing {
			if g.Found {
				t.Fatalf("result %d: a chunk nobody holds was found", k)
			}
			continue
		}
		check(k, slices.Index(ids, order[k]), g)
	}
}
