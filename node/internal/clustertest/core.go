package clustertest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/owner"
	"github.com/kvring/kvring/node/internal/services"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// CoreConfig configures the nodes StartCore starts. Zero fields take the
// defaults named.
type CoreConfig struct {
	// Nodes is how many nodes. Default 3.
	Nodes int
	// MemoryLimit is each store's budget. Default 64 MiB.
	MemoryLimit int64
	// ReplicationFactor is the ring's (the most owners a namespace may
	// ask for). Default 3.
	ReplicationFactor int
	// PeerTimeout and CommitTimeout bound a coordinator's exchanges.
	// Defaults 30 s and 1 min: bounds of a hang, not speed tests (a loaded
	// machine under the race detector is slow); tests of hung peers set
	// short ones.
	PeerTimeout, CommitTimeout time.Duration
	// Now is every node's clock. Default time.Now.
	Now func() time.Time
	// Coord, if set, adjusts node i's coordinator configuration.
	Coord func(i int, cfg *coord.Config)
	// Owner, if set, adjusts node i's owner configuration.
	Owner func(i int, cfg *owner.Config)
	// Wrap, if set, wraps node i's Peer service (a fault injected in an
	// owner: a wrapper that holds or drops some of its answers).
	Wrap func(i int, peer kvringv1.PeerServer) kvringv1.PeerServer
	// Intercept, if set, returns the stream interceptor of node i's server
	// (nil: none), to watch or hold its calls.
	Intercept func(i int) grpc.StreamServerInterceptor
}

// Core is a cluster of core nodes.
type Core struct {
	*Cluster
	Nodes []*Node
}

// Node is one core node: a store, a namespace registry, an owner (the Peer
// service) and a coordinator (the Cache service), served over gRPC on
// 127.0.0.1. Its coordinator reaches its peers through the Network.
type Node struct {
	ID, Addr string
	Store    *store.Store
	Registry *namespace.Registry
	Owner    *owner.Owner
	Coord    *coord.Coordinator
	Server   *grpc.Server
	Metrics  *metrics.Set
}

// Member is the node as a ring member.
func (n *Node) Member() ring.Member { return ring.Member{ID: n.ID, Addr: n.Addr} }

// Stop stops the node's server at once, as if its process died; the ring
// still lists it.
func (n *Node) Stop() { n.Server.Stop() }

// StartCore starts cfg.Nodes core nodes that share one ring (epoch 1),
// stopped when the test ends.
func StartCore(t testing.TB, cfg CoreConfig) *Core {
	t.Helper()
	setCoreDefaults(&cfg)
	c := &Core{Cluster: NewCluster()}
	members := make([]ring.Member, cfg.Nodes)
	for i := range cfg.Nodes {
		n := c.startNode(t, i, cfg)
		c.Nodes = append(c.Nodes, n)
		members[i] = n.Member()
	}
	c.SetMembers(t, members, 1, cfg.ReplicationFactor)
	return c
}

func setCoreDefaults(cfg *CoreConfig) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.MemoryLimit == 0 {
		cfg.MemoryLimit = 64 << 20
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = 3
	}
	if cfg.PeerTimeout == 0 {
		cfg.PeerTimeout = 30 * time.Second
	}
	if cfg.CommitTimeout == 0 {
		cfg.CommitTimeout = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
}

// coreServicesConfig is node i's services configuration: what a core node
// has always been wired with (small batches and pins, no spreading, one
// replica by default), through the node's own wiring (services.New), with
// cfg's hooks.
func coreServicesConfig(i int, cfg CoreConfig) *services.Config {
	scfg := &services.Config{Logger: quiet(), Now: cfg.Now, MaxReplicas: cfg.ReplicationFactor, Replication: 1, MinReplicas: 1,
		MaxBatchChunks: 1024, MaxPinLease: time.Minute, CommitTimeout: cfg.CommitTimeout, PeerTimeout: cfg.PeerTimeout,
		Spread: services.SpreadConfig{Threshold: -1}, MaxRecvMsgBytes: 4 << 20, MaxStreamsPerConn: 256,
		// A client's leases outlive a blip, as on a node
		// (node.DefaultClientGoneGrace).
		ClientGoneGrace: 5 * time.Second,
		// Peers ping idle connections every 10 s (coord's peer pool).
		KeepaliveMinTime: 5 * time.Second}
	if cfg.Owner != nil {
		scfg.AdjustOwner = func(o *owner.Config) { cfg.Owner(i, o) }
	}
	if cfg.Coord != nil {
		scfg.AdjustCoord = func(cc *coord.Config) { cfg.Coord(i, cc) }
	}
	if cfg.Wrap != nil {
		scfg.WrapPeer = func(p kvringv1.PeerServer) kvringv1.PeerServer { return cfg.Wrap(i, p) }
	}
	if cfg.Intercept != nil {
		if ic := cfg.Intercept(i); ic != nil {
			scfg.ServerOptions = []grpc.ServerOption{grpc.StreamInterceptor(ic)}
		}
	}
	return scfg
}

// quiet is a logger that writes nothing.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startNode wires and serves node i.
func (c *Core) startNode(t testing.TB, i int, cfg CoreConfig) *Node {
	t.Helper()
	lis := Listen(t)
	st, err := store.Open(store.Config{DataDir: t.TempDir(), ShmDir: testutil.ShmDir(t, "core-"), MemoryLimit: cfg.MemoryLimit,
		MaintenanceInterval: -1, Now: cfg.Now, Logger: quiet()})
	if err != nil {
		t.Fatalf("cannot open node %d's store: %v", i, err)
	}
	svc := services.New(coreServicesConfig(i, cfg), st, services.ClusterView{Ring: c.Ring, Unsettled: c.Unsettled,
		Moves: c.Moves, Draining: c.Draining, Suspect: c.Suspect, PeerDial: []grpc.DialOption{c.Net.DialOption(st.NodeID())}})
	n := &Node{ID: st.NodeID(), Addr: lis.Addr().String(), Store: st, Registry: svc.Registry, Owner: svc.Owner,
		Coord: svc.Coord, Server: svc.GRPC, Metrics: svc.Metrics}
	c.OnRingChange(n.Coord.RingChanged)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = svc.Serve(lis)
	}()
	t.Cleanup(func() {
		svc.Close()
		<-served
		_ = st.Close()
	})
	return n
}

// Dial returns a connection to node i as an engine's, straight (no
// faults), closed when the test ends.
func (c *Core) Dial(t testing.TB, i int) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+c.Nodes[i].Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("cannot dial node %d: %v", i, err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Cache returns node i's Cache service as an engine calls it.
func (c *Core) Cache(t testing.TB, i int) kvringv1.CacheClient {
	return kvringv1.NewCacheClient(c.Dial(t, i))
}

// Peer returns node i's Peer service as a coordinator calls it.
func (c *Core) Peer(t testing.TB, i int) kvringv1.PeerClient {
	return kvringv1.NewPeerClient(c.Dial(t, i))
}

// Register registers namespace name (schema: model m, bf16, 16 tokens a
// chunk) with replicas owners per chunk, at least minReplicas holders, on
// every node (through node 0, which tells the others), and returns its
// reference.
func (c *Core) Register(t testing.TB, name string, replicas, minReplicas uint32) *kvringv1.NamespaceRef {
	t.Helper()
	return c.RegisterSchema(t, name, &kvringv1.NamespaceSchema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, replicas, minReplicas)
}

// RegisterSchema is Register with schema.
func (c *Core) RegisterSchema(t testing.TB, name string, schema *kvringv1.NamespaceSchema, replicas, minReplicas uint32) *kvringv1.NamespaceRef {
	t.Helper()
	resp, err := c.Cache(t, 0).RegisterNamespace(context.Background(), &kvringv1.RegisterNamespaceRequest{Name: name,
		Schema: schema, ReplicationFactor: replicas, MinReplicas: minReplicas})
	if err != nil {
		t.Fatalf("cannot register namespace %q: %v", name, err)
	}
	rec := resp.GetNamespace()
	return &kvringv1.NamespaceRef{Name: rec.GetName(), Fingerprint: rec.GetFingerprint()}
}

// NodeOf returns the node with id.
func (c *Core) NodeOf(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}
