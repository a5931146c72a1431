package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/internal/clustertest"
	"github.com/kvring/kvring/node/internal/collectors"
	"github.com/kvring/kvring/node/internal/services"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// testNode is one node of an in-process cluster with a fixed ring: a store
// and the services a node serves (wired by services.New, as Start wires them)
// on 127.0.0.1.
type testNode struct {
	id   string
	addr string
	st   *store.Store
	svc  *services.Services
	reg  *prometheus.Registry // the node's metrics
	gs   *grpc.Server
	lis  net.Listener
}

// testCluster is an in-process cluster of full nodes: the shared
// clustertest.Cluster holds the ring every node reads, who drains and
// whether reads are unsettled, and carries the nodes' peer connections
// through its Network (whose faults the tests set).
type testCluster struct {
	*clustertest.Cluster
	nodes []*testNode
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestCluster starts n nodes that all see the same ring.
func newTestCluster(t testing.TB, n int, limit int64) *testCluster {
	return newTestClusterWith(t, n, limit, nil)
}

// newTestClusterWith starts n nodes that all see the same ring; change, if
// set, adjusts node i's configuration before its services are wired.
func newTestClusterWith(t testing.TB, n int, limit int64, change func(i int, cfg *Config)) *testCluster {
	t.Helper()
	tc := &testCluster{Cluster: clustertest.NewCluster()}
	var members []ring.Member
	for i := 0; i < n; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		shm := testutil.ShmDir(t, "node-")
		cfg := DefaultConfig()
		cfg.Logger = quietLogger()
		cfg.Registerer = prometheus.NewRegistry()
		cfg.Store = store.Config{DataDir: t.TempDir(), ShmDir: shm, MemoryLimit: limit, MaintenanceInterval: -1}
		// The timeouts bound a peer that hangs, not one that is slow: on a
		// loaded 2-core machine under the race detector a healthy peer can
		// take seconds to answer, and a lookup that gives up on it counts its
		// chunks as missing. Tests of hung peers set short ones.
		cfg.CommitTimeout, cfg.PeerTimeout, cfg.Store.MaxPinLease = time.Minute, 30*time.Second, time.Minute
		if change != nil {
			change(i, &cfg)
		}
		if err := cfg.validate(); err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(cfg.Store)
		if err != nil {
			t.Fatal(err)
		}
		nd := &testNode{id: st.NodeID(), addr: lis.Addr().String(), st: st, lis: lis, reg: cfg.Registerer.(*prometheus.Registry)}
		nd.svc = services.New(servicesConfig(&cfg, nil), st, services.ClusterView{Ring: tc.Ring, Unsettled: tc.Unsettled,
			Draining: tc.Draining, Suspect: tc.Suspect, PeerDial: []grpc.DialOption{tc.Net.DialOption(st.NodeID())}})
		nd.reg.MustRegister(collectors.Node(nd.svc, st, nil, tc.Ring)...)
		nd.gs = nd.svc.GRPC
		healthpb.RegisterHealthServer(nd.gs, health.NewServer())
		go nd.svc.Serve(lis)
		tc.nodes = append(tc.nodes, nd)
		members = append(members, ring.Member{ID: nd.id, Addr: nd.addr})
		t.Cleanup(func() {
			nd.svc.Close()
			st.Close()
		})
	}
	rcfg := ring.DefaultConfig()
	rcfg.ReplicationFactor = 3
	r, err := ring.New(members, 1, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	tc.Store(r)
	return tc
}

// stop kills a node's server (as if the process died); the ring still lists it.
func (n *testNode) stop() { n.gs.Stop() }

// testCallTimeout bounds a test client's call that has no deadline of its
// own: a bound on a hang, not a speed test (the SDK's default of 10s is
// outrun by a loaded machine).
const testCallTimeout = 2 * time.Minute

func testClient(t testing.TB, addr string, rf, minR uint32) *client.Client {
	t.Helper()
	return testClientWith(t, client.Config{
		Conn:              client.ConnConfig{Seeds: []string{addr}},
		Namespace:         "test/model",
		Schema:            client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16},
		ReplicationFactor: rf, MinReplicas: minR,
		Logger: quietLogger(),
	})
}

// testClientWith creates a client with cfg and waits until it is connected.
// A call without a deadline gets two minutes (testCallTimeout) unless cfg
// says otherwise.
func testClientWith(t testing.TB, cfg client.Config) *client.Client {
	t.Helper()
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = testCallTimeout
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	return c
}

func chunkOf(n uint64, size int) client.Chunk {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	id := client.ChunkID(sha256.Sum256(b[:]))
	data := make([]byte, size)
	for off := 0; off < size; off += 32 {
		h := sha256.Sum256(append(id[:], byte(off>>8), byte(off)))
		copy(data[off:], h[:])
	}
	return client.Chunk{ID: id, Data: data}
}

// TestConfirmedWritesAreReadableFromEveryCoordinator: chunks put through one
// node are reported stored with R holders, and read back byte-exact through
// any node.
func TestConfirmedWritesAreReadableFromEveryCoordinator(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	c := testClient(t, tc.nodes[0].addr, 2, 1)
	ctx := context.Background()
	var chunks []client.Chunk
	for i := uint64(0); i < 24; i++ {
		chunks = append(chunks, chunkOf(i, 100_000+int(i)*1000))
	}
	res, err := c.Put(ctx, chunks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != client.Stored || len(r.Holders) != 2 || r.Degraded {
			t.Fatalf("chunk %d: %+v, want stored on 2 nodes", i, r)
		}
	}
	// A second put moves no bytes and says so.
	again, err := c.Put(ctx, chunks[:3])
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if r.Status != client.AlreadyHeld || len(r.Holders) != 2 {
			t.Fatalf("re-put %d: %+v, want already held on 2 nodes", i, r)
		}
	}
	ids := make([]client.ChunkID, len(chunks))
	for i := range chunks {
		ids[i] = chunks[i].ID
	}
	for _, nd := range tc.nodes {
		other := testClient(t, nd.addr, 0, 0)
		got, err := other.Get(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			if !g.Found || !bytes.Equal(g.Data, chunks[i].Data) {
				t.Fatalf("via %s: chunk %d found=%v reason=%q", nd.id, i, g.Found, g.Reason)
			}
		}
		lr, err := other.Lookup(ctx, append(ids, chunkOf(999, 10).ID), 0)
		if err != nil {
			t.Fatal(err)
		}
		if lr.Held != len(ids) {
			t.Fatalf("lookup via %s: %d held, want %d", nd.id, lr.Held, len(ids))
		}
	}
}

// TestWritesStayHonestWhenAnOwnerIsDown: with one of three nodes dead (still
// in the ring), R=2 writes where one owner is gone are stored on two live
// nodes (the other owner and, in the dead one's place, the next member in
// ring order), every stored chunk reads back, and lookups never count a
// chunk only the dead node holds.
func TestWritesStayHonestWhenAnOwnerIsDown(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	c := testClient(t, tc.nodes[0].addr, 2, 1)
	ctx := context.Background()
	dead := tc.nodes[2]
	// A chunk held only by the dead node (written there with R=1 before it died).
	solo := testClient(t, dead.addr, 0, 0)
	_ = solo
	dead.stop()

	var chunks []client.Chunk
	for i := uint64(100); i < 130; i++ {
		chunks = append(chunks, chunkOf(i, 50_000))
	}
	res, err := c.Put(ctx, chunks)
	if err != nil {
		t.Fatal(err)
	}
	substituted := 0
	for i, r := range res {
		if r.Status != client.Stored || r.Degraded || len(r.Holders) != 2 {
			t.Fatalf("chunk %d: %+v, want stored on two live nodes", i, r)
		}
		for _, h := range r.Holders {
			if h.ID == dead.id {
				t.Fatalf("chunk %d reported held by the dead node", i)
			}
		}
		if slices.ContainsFunc(tc.Ring().Owners("test/model", chunks[i].ID[:], 2), func(m ring.Member) bool { return m.ID == dead.id }) {
			substituted++
		}
	}
	if substituted == 0 {
		t.Fatal("the dead node owns none of the chunks; the test proves nothing")
	}
	ids := make([]client.ChunkID, len(chunks))
	for i := range chunks {
		ids[i] = chunks[i].ID
	}
	got, err := c.Get(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !g.Found || !bytes.Equal(g.Data, chunks[i].Data) {
			t.Fatalf("chunk %d: found=%v reason=%q", i, g.Found, g.Reason)
		}
	}
}

// serveFake serves, on a loopback port the kernel picks, a gRPC server with
// whatever register adds to it, until the test ends, and returns its address.
func serveFake(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	register(gs)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// useMembers makes members every node's ring: epoch 2, up to 3 owners.
// Each coordinator is told of the change, as a node's membership tells it.
func (tc *testCluster) useMembers(t *testing.T, members []ring.Member) {
	t.Helper()
	rcfg := ring.DefaultConfig()
	rcfg.ReplicationFactor = 3
	r, err := ring.New(members, 2, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	old := tc.Swap(r)
	for _, n := range tc.nodes {
		n.svc.Coord.RingChanged(old, r)
	}
}

// TestR1WritesToADownOwnerAreStoredInItsPlace: with an owner down but still
// in the ring (gossip has not declared it dead), an R=1 write of its chunks
// is stored on the next member in ring order, reported with that holder,
// and counted by lookups and read back meanwhile.
func TestR1WritesToADownOwnerAreStoredInItsPlace(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	c := testClientWith(t, client.Config{Conn: client.ConnConfig{Seeds: []string{tc.nodes[0].addr}}, Namespace: "test/model",
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, ReplicationFactor: 1, MinReplicas: 1,
		DisableRouting: true, Logger: quietLogger()})
	dead := tc.nodes[2]
	dead.stop()
	var chunks []client.Chunk
	var ids []client.ChunkID
	owned := 0
	for i := uint64(0); i < 30; i++ {
		ch := chunkOf(7000+i, 10_000)
		chunks, ids = append(chunks, ch), append(ids, ch.ID)
		if p, _ := tc.Ring().Primary("test/model", ch.ID[:]); p.ID == dead.id {
			owned++
		}
	}
	if owned == 0 {
		t.Fatal("the dead node owns none of the chunks; the test proves nothing")
	}
	res, err := c.Put(context.Background(), chunks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != client.Stored || len(r.Holders) != 1 || r.Holders[0].ID == dead.id {
			t.Fatalf("chunk %d: %+v, want stored on one live node", i, r)
		}
	}
	lr, err := c.Lookup(context.Background(), ids, 0)
	if err != nil || lr.Held != len(ids) {
		t.Fatalf("lookup: %+v %v, want all %d held", lr, err, len(ids))
	}
	got, err := c.Get(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !g.Found || !bytes.Equal(g.Data, chunks[i].Data) {
			t.Fatalf("chunk %d: found %v (%s)", i, g.Found, g.Reason)
		}
	}
}

// TestAPartitionedCoordinatorNeverReportsAChunkStoredElsewhere: a node cut
// off from every other member (the test cluster's network partitioned)
// still answers its engine honestly: with R=3 and min replicas 2 nothing
// is stored (only it can hold a chunk), and each result names at most
// this node as holder; once the partition heals (and the coordinator's
// connections are back) the same put is stored on three nodes.
func TestAPartitionedCoordinatorNeverReportsAChunkStoredElsewhere(t *testing.T) {
	t.Parallel()
	tc := newTestClusterWith(t, 3, 64<<20, func(_ int, cfg *Config) { cfg.PeerTimeout = 5 * time.Second })
	c := testClientWith(t, client.Config{Conn: client.ConnConfig{Seeds: []string{tc.nodes[0].addr}}, Namespace: "test/model",
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, ReplicationFactor: 3, MinReplicas: 2,
		DisableRouting: true, Logger: quietLogger()})
	tc.Net.Partition([]string{tc.nodes[0].id}, []string{tc.nodes[1].id, tc.nodes[2].id})
	var chunks []client.Chunk
	for i := uint64(200); i < 208; i++ {
		chunks = append(chunks, chunkOf(i, 20_000))
	}
	ctx := context.Background()
	res, err := c.Put(ctx, chunks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status.Held() || slices.ContainsFunc(r.Holders, func(h client.Node) bool { return h.ID != tc.nodes[0].id }) {
			t.Fatalf("chunk %d with its coordinator partitioned: %+v", i, r)
		}
	}
	tc.Net.HealAll()
	// The coordinator's connections come back after gRPC's reconnect backoff.
	testutil.Eventually(t, "the put to be stored on three nodes after the heal", time.Minute, func() bool {
		res, err := c.Put(ctx, chunks)
		return err == nil && !slices.ContainsFunc(res, func(r client.PutResult) bool { return !r.Status.Held() || len(r.Holders) != 3 })
	})
}
