package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// Node is one kvring node. Its methods are safe for concurrent use.
type Node struct {
	cfg Config
	log *slog.Logger

	ready atomic.Bool
	parts atomic.Pointer[nodeParts] // set by Start once store, membership and services exist; see info.go

	mu        sync.Mutex // guards the fields below and serialises Start/Close
	started   bool
	closed    bool
	store     *store.Store
	grpcLis   net.Listener
	grpcSrv   *grpc.Server
	health    *health.Server
	adminLis  net.Listener
	adminSrv  *http.Server
	member    *membership
	svc       *services
	metrics   *metrics
	unmetrics func() // unregisters the node's metrics
	stop      chan struct{}
	wg        sync.WaitGroup
	closeErr  error
	startedAt time.Time
}

// New checks cfg and returns a node that is not started. It does no I/O.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Node{cfg: cfg, log: cfg.Logger, stop: make(chan struct{})}, nil
}

// phase logs a start-up phase with its duration.
func (n *Node) phase(name string, t time.Time, args ...any) {
	n.log.Info("start-up phase done", append([]any{"phase", name, "duration", time.Since(t).Round(time.Microsecond)}, args...)...)
}

// Start opens the store, the gRPC and admin listeners, joins the cluster and
// serves. It blocks until the node serves or a step fails; on failure what
// was opened is closed again.
func (n *Node) Start(ctx context.Context) (err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started || n.closed {
		return errors.New("node: Start called twice or after Close")
	}
	n.started = true
	n.startedAt = time.Now()
	defer func() {
		if err != nil {
			n.closeLocked(context.Background())
		}
	}()

	t := time.Now()
	st, err := store.Open(n.cfg.Store)
	if err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	n.store = st
	n.phase("store", t, "node", st.NodeID())

	t = time.Now()
	lc := net.ListenConfig{}
	if n.grpcLis, err = lc.Listen(ctx, "tcp", n.cfg.GRPCAddr); err != nil {
		return fmt.Errorf("cannot start node: cannot listen for gRPC on %q: %w", n.cfg.GRPCAddr, err)
	}
	if n.adminLis, err = lc.Listen(ctx, "tcp", n.cfg.AdminAddr); err != nil {
		return fmt.Errorf("cannot start node: cannot listen for admin HTTP on %q: %w", n.cfg.AdminAddr, err)
	}
	n.phase("listeners", t, "grpc", n.grpcLis.Addr().String(), "admin", n.adminLis.Addr().String())

	t = time.Now()
	mcfg := n.cfg.Membership
	mcfg.NodeID = st.NodeID()
	mcfg.GRPCAddr, err = n.advertisedGRPC(mcfg)
	if err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	mcfg.AdminAddr = sameHost(n.adminLis.Addr().String(), mcfg.GRPCAddr)
	if n.member, err = newMembership(mcfg); err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	n.metrics = newMetrics()
	n.svc = newServices(st, n.member.ring, servicesConfig{
		self: st.NodeID(), maxBatch: n.cfg.MaxBatchChunks, stageLease: n.cfg.Store.StageLease,
		commitTimeout: n.cfg.CommitTimeout, broadcastTimeout: n.cfg.CommitTimeout, peerTimeout: n.cfg.PeerTimeout,
		maxReplicas: n.cfg.Membership.Ring.ReplicationFactor, maxPinLease: n.cfg.Store.MaxPinLease,
		replicas: n.cfg.Replication, minReplicas: n.cfg.MinReplicas,
		now: n.cfg.Now, log: n.log.With("component", "coordinator"), metrics: n.metrics, unsettled: n.member.unsettled,
	})
	if n.unmetrics, err = registerAll(n.cfg.Registerer, nodeCollectors(n.metrics, st, n.svc, n.member.members, n.member.ring)...); err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	n.member.onRingChange = n.ringChanged
	n.parts.Store(&nodeParts{store: st, member: n.member, svc: n.svc})
	n.grpcSrv = grpc.NewServer(serverOptions(n.metrics)...)
	n.svc.register(n.grpcSrv)
	n.health = health.NewServer()
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(n.grpcSrv, n.health)
	n.serve("grpc", func() error { return n.grpcSrv.Serve(n.grpcLis) })
	n.adminSrv = &http.Server{Handler: n.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	n.serve("admin", func() error {
		if err := n.adminSrv.Serve(n.adminLis); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	if err := n.member.start(ctx); err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	n.phase("membership", t, "gossip", n.member.gossipAddr(), "seeds", len(mcfg.Join))

	n.wg.Add(1)
	go n.maintain()
	n.wg.Add(1)
	go n.syncNamespaces()

	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if err := n.member.setState(sctx, NodeActive); err != nil {
		n.log.Warn("cannot announce the active state yet; peers will learn it by gossip", "err", err)
	}
	cancel()
	n.ready.Store(true)
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	n.log.Info("node ready", "node", st.NodeID(), "grpc", n.grpcLis.Addr().String(), "admin", n.adminLis.Addr().String(),
		"gossip", n.member.gossipAddr(), "memory_limit", st.Limit(), "startup", time.Since(n.startedAt).Round(time.Microsecond))
	return nil
}

// advertisedGRPC is the gRPC address gossiped to peers.
func (n *Node) advertisedGRPC(m MembershipConfig) (string, error) {
	if n.cfg.AdvertiseGRPCAddr != "" {
		return n.cfg.AdvertiseGRPCAddr, nil
	}
	host, port, _ := net.SplitHostPort(n.grpcLis.Addr().String())
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		return n.grpcLis.Addr().String(), nil
	}
	// Bound to all interfaces: advertise the host gossip advertises.
	probe := m
	if err := probe.validate(); err != nil {
		return "", err
	}
	bind, err := parseBindAddr(probe.GossipAddr)
	if err != nil {
		return "", err
	}
	ip, _, err := probe.advertiseIP(context.Background(), bind)
	if err != nil {
		return "", fmt.Errorf("cannot work out the gRPC address to advertise: %w", err)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// sameHost replaces an unspecified host in addr with the host of like, so
// operators are told an address they can reach.
func sameHost(addr, like string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		return addr
	}
	if h, _, err := net.SplitHostPort(like); err == nil {
		return net.JoinHostPort(h, port)
	}
	return addr
}

// serve runs a server loop on a goroutine the node owns.
func (n *Node) serve(name string, run func() error) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := run(); err != nil {
			n.log.Error("server stopped", "server", name, "err", err)
		}
	}()
}

// ringChanged runs on the membership goroutine after each ring rebuild:
// connections to peers that left are closed.
func (n *Node) ringChanged(_, r *ring.Ring) {
	live, liveIDs := map[string]bool{}, map[string]bool{}
	for _, m := range r.Members() {
		live[m.Addr] = true
		liveIDs[m.ID] = true
	}
	n.svc.pool.keep(live)
	n.svc.coord.peers.keep(liveIDs)
}

// maintain sweeps expired stage tokens and leases until the node stops.
func (n *Node) maintain() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.MaintenanceInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			n.svc.sweep(n.cfg.Now())
		}
	}
}

// syncNamespaces learns the namespaces registered before this node joined,
// from the first peer that answers.
func (n *Node) syncNamespaces() {
	defer n.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.CommitTimeout)
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for _, m := range n.member.ring().Members() {
		if m.ID == n.store.NodeID() {
			continue
		}
		pc, err := n.svc.pool.client(m.Addr)
		if err != nil {
			continue
		}
		resp, err := pc.ListNamespaces(ctx, &kvringv1.ListNamespacesRequest{Caller: n.svc.coord.caller()})
		if err != nil {
			continue
		}
		for _, rec := range resp.GetNamespaces() {
			n.svc.reg.merge(rec)
		}
		n.log.Info("learned namespaces from a peer", "node", m.ID, "namespaces", len(resp.GetNamespaces()))
		return
	}
}

// GRPCAddr is the address the gRPC server listens on (useful with port 0).
func (n *Node) GRPCAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.grpcLis == nil {
		return ""
	}
	return n.grpcLis.Addr().String()
}

// AdminAddr is the address the admin server listens on (useful with port 0).
func (n *Node) AdminAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.adminLis == nil {
		return ""
	}
	return n.adminLis.Addr().String()
}

// GossipAddr is the address gossip listens on.
func (n *Node) GossipAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.member == nil {
		return ""
	}
	return n.member.gossipAddr()
}

// Ring returns the current ring view (nil before Start).
func (n *Node) Ring() *ring.Ring {
	n.mu.Lock()
	m := n.member
	n.mu.Unlock()
	if m == nil {
		return nil
	}
	return m.ring()
}

// Store returns the node's local store (nil before Start).
func (n *Node) Store() *store.Store {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.store
}

// Ready reports whether the node serves.
func (n *Node) Ready() bool { return n.ready.Load() }

// Close stops the node: readiness goes false, the node leaves the gossip
// cluster, the gRPC and admin servers let in-flight requests finish until ctx
// ends, the store writes its catalog and closes, and every goroutine the node
// started has exited when Close returns. Idempotent.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closeLocked(ctx)
}

func (n *Node) closeLocked(ctx context.Context) error {
	if n.closed {
		return n.closeErr
	}
	n.closed = true
	n.ready.Store(false)
	t := time.Now()
	var errs []error
	if n.health != nil {
		n.health.Shutdown() // clients see NOT_SERVING and move on
	}
	if n.member != nil {
		// Peers notice a node that could not say goodbye through failure
		// detection; that is not a failed shutdown.
		if err := n.member.close(ctx); err != nil {
			n.log.Warn("left the cluster without a confirmed goodbye", "err", err)
		}
	}
	if n.grpcSrv != nil {
		done := make(chan struct{})
		go func() { n.grpcSrv.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			n.grpcSrv.Stop()
			<-done
			errs = append(errs, fmt.Errorf("cannot drain gRPC requests: %w", ctx.Err()))
		}
	} else if n.grpcLis != nil {
		n.grpcLis.Close()
	}
	if n.adminSrv != nil {
		if err := n.adminSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("cannot drain admin server: %w", err))
			n.adminSrv.Close()
		}
	} else if n.adminLis != nil {
		n.adminLis.Close()
	}
	close(n.stop)
	n.wg.Wait()
	if n.svc != nil {
		n.svc.pool.close()
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.unmetrics != nil {
		n.unmetrics()
	}
	n.closeErr = errors.Join(errs...)
	if n.started {
		n.log.Info("node stopped", "duration", time.Since(t).Round(time.Microsecond), "err", n.closeErr)
	}
	return n.closeErr
}
