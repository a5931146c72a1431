package services

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/moves"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/owner"
	"github.com/kvring/kvring/node/internal/spread"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// Services is what a node serves over gRPC, around one store and one ring
// view: the namespace registry, the owner (Peer service), the coordinator
// (Cache service) and the gRPC server both are registered on. New is the
// one place they are wired, for the node's Start and for the in-process
// test clusters (node's and clustertest's) alike. The fields are set by
// New and never replaced.
type Services struct {
	Registry *namespace.Registry
	Owner    *owner.Owner
	Coord    *coord.Coordinator
	Metrics  *metrics.Set
	GRPC     *grpc.Server
	// Spread is what the node knows of hot groups; Spreader copies the hot
	// groups this node is the primary owner of (its goroutine is started
	// and stopped by the node; the test clusters run it with RunOnce).
	Spread   *spread.Table
	Spreader *spread.Spreader
	// placed is told where the chunks a prepare stages are placed (the
	// node sets it to its mover's Placed before serving).
	placed *placedHook
	// clients are the clients each open connection carries (clientNamer
	// names them, connWatch reports the connections' ends).
	clients *clientConns
}

// placedHook forwards owner.Config.Placed to a function set once, before
// the node serves (nil: nobody is told).
type placedHook struct {
	f func(name, ns string, replicas int, keys [][]byte, ids []store.ID)
}

func (h *placedHook) call(name, ns string, replicas int, keys [][]byte, ids []store.ID) {
	if h.f != nil {
		h.f(name, ns, replicas, keys, ids)
	}
}

// ClusterView is what the services read of the cluster: the ring, whether
// it changed lately (Unsettled: reads also ask non-owners; nil: never), who
// drains (nil: nobody) and whom gossip suspects. None may block.
type ClusterView struct {
	Ring      func() *ring.Ring
	Unsettled func() bool
	Draining  func(id string) bool
	// Suspect: gossip suspects a member, or holds it dead while the ring
	// still lists it (nil: never asked).
	Suspect func(id string) bool
	// Died: a member that left the ring was declared dead, not drained
	// (nil: none did).
	Died func(id string) bool
	// Moves is who may hold chunks of partitions they do not own (nil:
	// nobody; reads ask owners, or every member while unsettled).
	Moves func() *moves.View
	// PeerDial are added to the options of the connections to peers (the
	// test clusters' network). Optional.
	PeerDial []grpc.DialOption
}

// New wires the services of a node with configuration cfg around st and
// view. It does no I/O; the caller serves them (Serve) on a listener.
// cfg.Credentials authenticates calls and peer connections (nil: no
// security).
func New(cfg *Config, st *store.Store, view ClusterView) *Services {
	rg, unsettled := view.Ring, view.Unsettled
	sec := cfg.Credentials
	m := metrics.New()
	shareLog := cfg.Logger.With("component", "namespaces")
	reg := namespace.NewRegistryWith(namespace.RegistryConfig{MaxNamespaces: cfg.MaxNamespaces, Reserved: cfg.ReservedNamespaces,
		MaxReplicas: uint32(cfg.MaxReplicas), Now: cfg.Now, Catalog: st,
		ShareChanged: func(rec *kvringv1.NamespaceRecord) { enforceShare(st, rec, shareLog) }})
	epoch := func() uint64 {
		if r := rg(); r != nil {
			return r.Epoch()
		}
		return 0
	}
	table, meter := spread.NewTable(spread.TableConfig{Now: cfg.Now}), spread.NewMeter(cfg.Now)
	var spreader *spread.Spreader // made below, once the coordinator exists
	counter := spread.NewCounter(spread.CounterConfig{Threshold: cfg.Spread.Threshold, Window: cfg.Spread.Window, Now: cfg.Now,
		Spread: table, OnHot: func(h spread.Hot) { spreader.Offer(h) }})
	placed := &placedHook{}
	ocfg := owner.Config{Store: st, Log: cfg.Logger.With("component", "owner"), Registry: reg, Epoch: epoch,
		MaxBatch: cfg.MaxBatchChunks, MaxPin: cfg.MaxPinLease, Now: cfg.Now, Metrics: m, Counter: counter, Spread: table, Load: meter,
		Placed: placed.call}
	if cfg.AdjustOwner != nil {
		cfg.AdjustOwner(&ocfg)
	}
	o := owner.New(ocfg)
	ccfg := coord.Config{Self: st.NodeID(), Ring: rg, Unsettled: unsettled, Moves: view.Moves, Draining: view.Draining, Suspect: view.Suspect, Died: view.Died, Owner: o, Registry: reg,
		Log: cfg.Logger.With("component", "coordinator"), MaxBatch: cfg.MaxBatchChunks, CommitTimeout: cfg.CommitTimeout,
		PeerTimeout: cfg.PeerTimeout, CoalesceHas: cfg.CoalescePeerHas, BroadcastTimeout: cfg.CommitTimeout, IdleTimeout: max(cfg.PutIdleTimeout, 0), MinPutRate: max(cfg.PutMinRate, 0), MaxAwaitingBegin: max(cfg.PutMaxAwaitingBegin, 0), MaxPin: cfg.MaxPinLease,
		Defaults: namespace.Defaults{Replicas: uint32(cfg.Replication), MinReplicas: uint32(cfg.MinReplicas),
			MaxReplicas: uint32(cfg.MaxReplicas)},
		Limits: &kvringv1.Limits{MaxFrameBytes: transfer.MaxFrameBytes, MaxChunkBytes: uint64(st.MaxChunkSize()),
			MaxBatchChunks: uint32(cfg.MaxBatchChunks), MaxLeaseTtlMs: uint32(cfg.MaxPinLease / time.Millisecond)},
		Now: cfg.Now, Metrics: m, PeerDialOptions: append(sec.PeerDialOptions(), view.PeerDial...), Spread: table,
		Load: meter, Loads: spread.NewLoads(cfg.Now)}
	if cfg.AdjustCoord != nil {
		cfg.AdjustCoord(&ccfg)
	}
	c := coord.New(ccfg)
	spreader = newSpreader(cfg, st, reg, view, c, table)
	// A coordinator gone: its uncommitted chunks are freed at once, by the
	// listener (connWatch), which also counts the connections.
	clients := newClientConns(cfg.ClientGoneGrace, c.ClientGone)
	opts := append(append(serverOptions(cfg), sec.ServerOptions()...), clientNamer{sec: sec, conns: clients}.serverOptions()...)
	gs := grpc.NewServer(append(opts, cfg.ServerOptions...)...)
	var peer kvringv1.PeerServer = owner.NewService(o)
	if cfg.WrapPeer != nil {
		peer = cfg.WrapPeer(peer)
	}
	gs.RegisterService(transfer.StrictDecoding(&kvringv1.Cache_ServiceDesc), coord.NewService(c))
	gs.RegisterService(transfer.StrictDecoding(&kvringv1.Peer_ServiceDesc), peer)
	return &Services{Registry: reg, Owner: o, Coord: c, Metrics: m, GRPC: gs, Spread: table, Spreader: spreader, placed: placed, clients: clients}
}

// newSpreader wires the node's hot-group spreader: it copies through the
// coordinator (Copy, marked as spread copies) to members that neither
// drain nor are down.
func newSpreader(cfg *Config, st *store.Store, reg *namespace.Registry, view ClusterView, c *coord.Coordinator, table *spread.Table) *spread.Spreader {
	usable := func(id string) bool { return !c.IsDown(id) && (view.Draining == nil || !view.Draining(id)) }
	return spread.New(spread.Config{Self: st.NodeID(), Store: st, Registry: reg, Ring: view.Ring, Owners: c.Owners,
		Usable: usable, Copy: c.Copy, Table: table, Width: cfg.Spread.Width, TTL: cfg.Spread.TTL, Now: cfg.Now,
		Log: cfg.Logger.With("component", "spread")})
}

// serverOptions are the options of a node's gRPC server, with cfg's limits.
// transfer.Codec is required: Put and Prepare receive their frames as
// transfer.InFrame, without copying them.
func serverOptions(cfg *Config) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(transfer.NewCodec()),
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgBytes),
		// Frames are 1 MiB: read them in 256 KiB reads, and write them in
		// one write(2) from a buffer held only while writing.
		grpc.ReadBufferSize(256 << 10),
		grpc.WriteBufferSize(1 << 20),
		// Fixed windows: no window update and ping per call (transfer.StreamWindow).
		grpc.InitialWindowSize(transfer.StreamWindow), grpc.InitialConnWindowSize(transfer.ConnWindow),
		// gRPC's default pool clears every buffer it hands out; it fills
		// each before reading it, so a pool that does not clear is enough.
		experimental.BufferPool(transfer.BufferPool()),
		// Calls run on a few long-lived goroutines when one is free (a new
		// goroutine otherwise): a handler's stack, grown once, is reused
		// instead of grown again by every call (runtime.morestack was 5 %
		// of a node's CPU under puts and lookups).
		grpc.NumStreamWorkers(uint32(4 * runtime.GOMAXPROCS(0))),
		// Advertised to clients, and enforced: a stream past it is refused,
		// and no more handlers than this run for one connection.
		grpc.MaxConcurrentStreams(uint32(cfg.MaxStreamsPerConn)),
		// Peers ping idle connections (PermitWithoutStream), every 10 s.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout,
			// gRPC reads 0 as no limit for idle and age (negative: none).
			MaxConnectionIdle: max(cfg.MaxConnIdle, 0), MaxConnectionAge: max(cfg.MaxConnAge, 0),
			MaxConnectionAgeGrace: cfg.MaxConnAgeGrace,
		}),
	}
}

// Sweep forgets stage tokens whose lease the store ended and lookup-lease
// records that have ended. The node's maintenance loop calls it.
func (s *Services) Sweep() {
	s.Owner.Sweep()
	s.Coord.Sweep()
	s.Spread.Sweep()
}

// SetPlaced sets the function told where the chunks a prepare stages are
// placed (the node's mover's Placed). Call it once, before serving.
func (s *Services) SetPlaced(f func(name, ns string, replicas int, keys [][]byte, ids []store.ID)) {
	s.placed.f = f
}

// Release ends the clients' grace timers (waiting for any that fired) and
// closes the peer connections. Call it once the gRPC server has stopped
// (the node drains it in Close first).
func (s *Services) Release() {
	s.clients.stop()
	s.Coord.Close()
}

// Close stops the gRPC server at once and releases the rest (Release); for
// the test clusters (a node drains its server in Close instead).
func (s *Services) Close() {
	s.GRPC.Stop()
	s.Release()
}

// RestoreNamespaces takes back the namespace records the store's catalog
// kept, before the node serves, so that a full restart of the cluster keeps
// its namespaces (clients need not register again, and reads find them).
// Blocks on the disk.
func RestoreNamespaces(st *store.Store, reg *namespace.Registry, log *slog.Logger) error {
	recs, err := st.NamespaceRecords()
	if err != nil {
		return fmt.Errorf("cannot restore the namespaces: %w", err)
	}
	restored, dropped := reg.Restore(recs)
	if len(dropped) > 0 {
		log.Warn("namespace records dropped from the catalog", "dropped", len(dropped), "first", dropped[0])
	}
	if restored > 0 {
		log.Info("namespaces restored from the catalog", "namespaces", restored)
	}
	for _, rec := range reg.List() {
		if rec.GetShare() != nil { // the store keeps its own copy; the record's is the cluster's setting
			enforceShare(st, rec, log)
		}
	}
	return nil
}
