package node

import (
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// services bundles what a node serves over gRPC: the owner (Peer service)
// and the coordinator (Cache service), around one store and one ring view.
type services struct {
	reg   *registry
	pool  *peerPool
	owner *owner
	coord *coordinator
	cache *cacheService
	peer  *peerService
}

// servicesConfig is the part of the node's configuration the services use.
type servicesConfig struct {
	self             string
	maxBatch         int
	stageLease       time.Duration
	commitTimeout    time.Duration
	peerTimeout      time.Duration
	broadcastTimeout time.Duration
	maxReplicas      int
	replicas         int // default replication factor of a new namespace
	minReplicas      int // default min replicas of a new namespace
	maxPinLease      time.Duration
	now              func() time.Time
	log              *slog.Logger
	// unsettled reports whether reads should also ask members that do not
	// own a chunk (shortly after a ring change); nil: never.
	unsettled func() bool
	// metrics receives the services' measurements; nil: an unregistered set.
	metrics *metrics
}

func newServices(st *store.Store, ringFn func() *ring.Ring, cfg servicesConfig) *services {
	reg := newRegistry()
	pool := newPeerPool()
	m := cfg.metrics
	if m == nil {
		m = newMetrics()
	}
	epoch := func() uint64 {
		if r := ringFn(); r != nil {
			return r.Epoch()
		}
		return 0
	}
	o := newOwner(st, cfg.log, reg, epoch, cfg.maxBatch, cfg.stageLease, cfg.maxPinLease, cfg.now)
	c := &coordinator{self: cfg.self, ring: ringFn, unsettled: cfg.unsettled, local: o, pool: pool, reg: reg, log: cfg.log, maxBatch: cfg.maxBatch,
		commitTimeout: cfg.commitTimeout, peerTimeout: cfg.peerTimeout, maxPin: cfg.maxPinLease, now: cfg.now,
		leases: make(map[uint64]coordLease), m: m, peers: newPeerFailures(cfg.log, cfg.now, m.peerFailures)}
	limits := &kvringv1.Limits{MaxFrameBytes: transfer.MaxFrameBytes, MaxChunkBytes: uint64(st.MaxChunkSize()),
		MaxBatchChunks: uint32(cfg.maxBatch), MaxLeaseTtlMs: uint32(cfg.maxPinLease / time.Millisecond)}
	return &services{reg: reg, pool: pool, owner: o, coord: c,
		cache: &cacheService{c: c, limits: limits, broadcastTimeout: cfg.broadcastTimeout, maxReplicas: cfg.maxReplicas,
			defaultReplicas: uint32(max(1, cfg.replicas)), defaultMinReplicas: uint32(max(1, cfg.minReplicas))},
		peer: &peerService{o: o, m: m}}
}

// serverOptions are the options of the gRPC server the services are
// registered on. transfer.Codec is required: Put and Prepare receive their
// frames as transfer.InFrame, without copying them.
func serverOptions(m *metrics) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(transfer.NewCodec()),
		grpc.MaxRecvMsgSize(4 << 20),
		// Frames are 1 MiB: read them in 256 KiB reads, and write them in
		// one write(2) from a buffer held only while writing.
		grpc.ReadBufferSize(256 << 10),
		grpc.WriteBufferSize(1 << 20),
		grpc.StatsHandler(connCounter{m}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	}
}

// register adds the Cache and Peer services to a gRPC server made with
// serverOptions.
func (s *services) register(gs *grpc.Server) {
	kvringv1.RegisterCacheServer(gs, s.cache)
	kvringv1.RegisterPeerServer(gs, s.peer)
}

// sweep drops expired stage tokens and leases.
func (s *services) sweep(now time.Time) {
	s.owner.sweep(now)
	s.coord.sweep(now)
}
