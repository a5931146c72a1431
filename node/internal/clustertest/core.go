package clustertest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
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
	n := &Node{ID: st.NodeID(), Addr: lis.Addr().String(), Store: st, Metrics: metrics.New()}
	n.Registry = namespace.NewRegistryWith(namespace.RegistryConfig{MaxReplicas: uint32(cfg.ReplicationFactor), Now: cfg.Now})
	epoch := func() uint64 {
		if r := c.Ring(); r != nil {
			return r.Epoch()
		}
		return 0
	}
	ocfg := owner.Config{Store: st, Log: quiet(), Registry: n.Registry, Epoch: epoch, MaxBatch: 1024,
		MaxPin: time.Minute, Now: cfg.Now, Metrics: n.Metrics}
	if cfg.Owner != nil {
		cfg.Owner(i, &ocfg)
	}
	n.Owner = owner.New(ocfg)
	ccfg := coord.Config{Self: n.ID, Ring: c.Ring, Unsettled: c.Unsettled, Moves: c.Moves, Draining: c.Draining, Suspect: c.Suspect, Owner: n.Owner,
		Registry: n.Registry, Log: quiet(), MaxBatch: 1024, CommitTimeout: cfg.CommitTimeout, PeerTimeout: cfg.PeerTimeout,
		BroadcastTimeout: cfg.CommitTimeout, MaxPin: time.Minute, Now: cfg.Now, Metrics: n.Metrics,
		Defaults:        namespace.Defaults{Replicas: 1, MinReplicas: 1, MaxReplicas: uint32(cfg.ReplicationFactor)},
		Limits:          &kvringv1.Limits{MaxFrameBytes: transfer.MaxFrameBytes, MaxChunkBytes: uint64(st.MaxChunkSize()), MaxBatchChunks: 1024},
		PeerDialOptions: []grpc.DialOption{c.Net.DialOption(n.ID)}}
	if cfg.Coord != nil {
		cfg.Coord(i, &ccfg)
	}
	n.Coord = coord.New(ccfg)
	c.OnRingChange(n.Coord.RingChanged)
	var peer kvringv1.PeerServer = owner.NewService(n.Owner)
	if cfg.Wrap != nil {
		peer = cfg.Wrap(i, peer)
	}
	opts := []grpc.ServerOption{grpc.ForceServerCodecV2(transfer.NewCodec()),
		// Peers ping idle connections every 10 s (coord's peer pool).
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true})}
	if cfg.Intercept != nil {
		if ic := cfg.Intercept(i); ic != nil {
			opts = append(opts, grpc.StreamInterceptor(ic))
		}
	}
	n.Server = grpc.NewServer(opts...)
	n.Server.RegisterService(transfer.StrictDecoding(&kvringv1.Cache_ServiceDesc), coord.NewService(n.Coord))
	n.Server.RegisterService(transfer.StrictDecoding(&kvringv1.Peer_ServiceDesc), peer)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = n.Server.Serve(lis)
	}()
	t.Cleanup(func() {
		n.Server.Stop()
		<-served
		n.Coord.Close()
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
