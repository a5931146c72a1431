package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kvring/kvring/node/internal/admin"
	"github.com/kvring/kvring/node/internal/collectors"
	"github.com/kvring/kvring/node/internal/handoff"
	"github.com/kvring/kvring/node/internal/localsock"
	"github.com/kvring/kvring/node/internal/netguard"
	"github.com/kvring/kvring/node/internal/resp"
	"github.com/kvring/kvring/node/internal/resp/respcoord"
	"github.com/kvring/kvring/node/internal/security"
	"github.com/kvring/kvring/node/internal/services"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/store/disk"
)

// Node is one kvring node. Its methods are safe for concurrent use; the
// getters never block.
type Node struct {
	cfg Config
	log *slog.Logger

	ready    atomic.Bool
	draining atomic.Bool // an operator asked this node to drain (POST /v1/drain)
	// parts is published once by Start, when every part exists, and never
	// replaced: the getters and the admin API read it without a lock.
	parts atomic.Pointer[nodeParts]

	mu       sync.Mutex // serialises Start and Close; guards the fields below
	started  bool
	closed   bool
	closeErr error
	opened   *nodeParts // what Start opened so far: Close undoes it, also after a failed Start
	// stopped ends when Close begins to wait for the node's goroutines.
	stopped context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// nodeParts are the parts Start opens, in that order.
type nodeParts struct {
	startedAt time.Time
	store     *store.Store
	disk      *disk.Tier // nil when the disk tier is off
	grpcLis   net.Listener
	adminLis  net.Listener
	member    *membership.Membership
	svc       *services.Services
	unmetrics func() // unregisters the node's metrics
	// resp serves the Redis-protocol port (nil when off); respUnmetrics
	// unregisters its metrics.
	resp          *resp.Server
	respCluster   *respcoord.Cluster // resp's Cluster
	respLis       net.Listener       // until resp takes it
	respSock      net.Listener       // the Redis-protocol Unix socket; resp owns it
	respUnmetrics func()
	health        *health.Server
	adminSrv      *http.Server
	socket        *localsock.Server // nil when the local socket is off
	mover         *handoff.Mover
	admin         *admin.API            // the admin HTTP API and views, made last
	sec           *security.Credentials // credentials read at start (node/internal/security)
	// guard keeps the listeners accepting when descriptors run out and
	// caps the gRPC port's connections (node/internal/netguard).
	guard *netguard.Guard
}

// New checks cfg and returns a node that is not started. It does no I/O.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	stopped, stop := context.WithCancel(context.Background())
	return &Node{cfg: cfg, log: cfg.Logger, stopped: stopped, stop: stop}, nil
}

// phase logs a start-up phase with its duration.
func (n *Node) phase(name string, t time.Time, args ...any) {
	n.log.Info("start-up phase done", append([]any{"phase", name, "duration", time.Since(t).Round(time.Microsecond)}, args...)...)
}

// Start opens the store, the gRPC and admin listeners, joins the cluster and
// serves. It blocks until the node serves or a step fails; on failure what
// was opened is closed again and the error names the step.
func (n *Node) Start(ctx context.Context) (err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started || n.closed {
		return errors.New("node: Start called twice or after Close")
	}
	n.started = true
	p := &nodeParts{startedAt: time.Now()}
	n.opened = p
	defer func() {
		if err != nil {
			n.closeLocked(context.Background())
		}
	}()
	if err := n.openStore(p); err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	if err := n.listen(ctx, p); err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	if err := n.secure(p); err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	t := time.Now()
	mcfg, err := n.membershipConfig(ctx, p)
	if err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	if err := n.wire(p, mcfg); err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	// Gossip starts with a summary of what the catalog holds, not "anything":
	// readers ask a restarted node only about the partitions it has chunks of.
	p.mover.Boot(ctx)
	if err := n.openSocket(p); err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	if err := n.openRESP(p); err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	p.admin = n.newAdmin(p)
	n.parts.Store(p)
	n.serveAll(p)
	if err := p.member.Start(ctx); err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	n.phase("membership", t, "gossip", p.member.GossipAddr(), "seeds", len(mcfg.Join))
	n.wg.Go(func() { n.maintain(p.svc) })
	n.wg.Go(func() { n.syncNamespaces(p.svc) })
	n.announceActive(ctx, p)
	p.mover.Start()
	p.svc.Spreader.Start()
	return nil
}

// openStore opens the local store (the first step).
func (n *Node) openStore(p *nodeParts) error {
	t := time.Now()
	scfg, err := n.openDisk(p)
	if err != nil {
		return err
	}
	if scfg.Companions == nil {
		scfg.Companions = n.cfg.RESP.KeyMap.Companions // a value's metadata is evicted with its kv_bytes
	}
	st, err := store.Open(scfg)
	if err != nil {
		return errors.Join(err, n.closeDisk(p))
	}
	p.store = st
	n.phase("store", t, "node", st.NodeID())
	return nil
}

// listen opens the gRPC and admin listeners.
func (n *Node) listen(ctx context.Context, p *nodeParts) (err error) {
	t := time.Now()
	lc := net.ListenConfig{}
	p.guard = netguard.New(n.log.With("component", "listener"))
	if p.grpcLis, err = lc.Listen(ctx, "tcp", n.cfg.GRPCAddr); err != nil {
		return fmt.Errorf("cannot listen for gRPC on %q: %w", n.cfg.GRPCAddr, err)
	}
	p.grpcLis = p.guard.Wrap("grpc", p.grpcLis, n.cfg.Conns.grpcLimits())
	if p.adminLis, err = lc.Listen(ctx, "tcp", n.cfg.AdminAddr); err != nil {
		return fmt.Errorf("cannot listen for admin HTTP on %q: %w", n.cfg.AdminAddr, err)
	}
	p.adminLis = p.guard.Wrap("admin", p.adminLis, netguard.Limits{})
	if a := n.cfg.RESP.Addr; a != "" {
		if p.respLis, err = lc.Listen(ctx, "tcp", a); err != nil {
			return fmt.Errorf("cannot listen for the Redis protocol on %q: %w", a, err)
		}
		p.respLis = p.guard.Wrap("resp", p.respLis, netguard.Limits{}) // its server caps connections itself
	}
	n.phase("listeners", t, "grpc", p.grpcLis.Addr().String(), "admin", p.adminLis.Addr().String())
	return nil
}

// membershipConfig is the configured membership with what only a started
// node knows: its id, the addresses it advertises and the hook that tells
// the coordinator about ring changes.
func (n *Node) membershipConfig(ctx context.Context, p *nodeParts) (membership.Config, error) {
	mcfg := n.cfg.Membership
	mcfg.NodeID = p.store.NodeID()
	if p.sec != nil && len(p.sec.GossipKeys()) > 0 {
		mcfg.Keys = p.sec.GossipKeys()
	}
	var err error
	if mcfg.GRPCAddr, err = n.advertisedGRPC(ctx, p.grpcLis, mcfg); err != nil {
		return mcfg, err
	}
	mcfg.AdminAddr = sameHost(p.adminLis.Addr().String(), mcfg.GRPCAddr)
	if p.respLis != nil {
		mcfg.RESPAddr = sameHost(p.respLis.Addr().String(), mcfg.GRPCAddr)
	}
	mcfg.OnRingChange = func(old, r *ring.Ring) {
		if q := n.parts.Load(); q != nil {
			q.svc.Coord.RingChanged(old, r)
			q.mover.Kick()
		}
	}
	mcfg.OnDrainingChange = func() { // chunks move off a draining member, and back when it stops
		if q := n.parts.Load(); q != nil {
			q.mover.Kick()
		}
	}
	mcfg.OnMemberGone = func(id string) { // its coordinator's lookup leases will never be released
		if q := n.parts.Load(); q != nil {
			if ended := q.svc.Owner.CoordinatorGone(id); ended > 0 {
				n.log.Info("ended the lookup leases of a coordinator that is gone", "member", id, "leases", ended)
			}
		}
	}
	return mcfg, nil
}

// wire creates the membership and the services, restores the namespaces
// the store kept and registers the metrics.
func (n *Node) wire(p *nodeParts, mcfg membership.Config) (err error) {
	if p.member, err = membership.New(mcfg); err != nil {
		return err
	}
	// Reads ask owners, and the members whose hand-off summaries say they
	// may hold a partition's chunks (moves); never every member at once.
	p.svc = services.New(servicesConfig(&n.cfg, p.sec), p.store, services.ClusterView{Ring: p.member.Ring, Moves: p.member.Moves,
		Draining: p.member.Draining, Suspect: p.member.Suspect, Died: p.member.Died})
	if err := services.RestoreNamespaces(p.store, p.svc.Registry, n.log); err != nil {
		return err
	}
	p.mover = handoff.New(handoff.Config{Self: p.store.NodeID(), Store: p.store, Registry: p.svc.Registry, Ring: p.member.Ring,
		Owners: p.svc.Coord.Owners, Peers: p.svc.Coord, Spread: p.svc.Spread, Announce: p.member.SetMoves, Rate: n.cfg.HandoffRate,
		Retry: n.cfg.HandoffRetry, Sweep: n.cfg.HandoffSweep, Batch: min(n.cfg.MaxBatchChunks, 1024),
		Log: n.cfg.Logger.With("component", "handoff")})
	p.svc.SetPlaced(p.mover.Placed)
	cs := append(collectors.Node(p.svc, p.store, p.member.Members, p.member.Ring), collectors.Build(n.cfg.Build))
	cs = append(cs, collectors.ActiveVersions(p.member.Active)...)
	p.unmetrics, err = registerAll(n.cfg.Registerer, append(cs,
		slices.Concat(p.mover.Collectors(), collectors.Spread(p.svc), collectors.Disk(p.disk), p.guard.Collectors(),
			collectors.Moves(p.member, p.mover, mcfg.Ring.PartitionCount))...)...)
	return err
}

// serveAll starts the gRPC server (not serving health until ready) and the
// admin server, each on a goroutine the node owns.
func (n *Node) serveAll(p *nodeParts) {
	p.health = health.NewServer()
	p.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(p.svc.GRPC, p.health)
	n.serve("grpc", func() error { return p.svc.Serve(p.grpcLis) })
	p.adminSrv = n.adminServer(p.admin.Handler())
	n.serve("admin", func() error {
		if err := p.adminSrv.Serve(p.adminLis); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
}

// adminServer is the admin HTTP server of h, with the configured limits.
func (n *Node) adminServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: orNone(n.cfg.AdminReadTimeout), WriteTimeout: orNone(n.cfg.AdminWriteTimeout),
		IdleTimeout: orNone(n.cfg.AdminIdleTimeout), MaxHeaderBytes: n.cfg.AdminMaxHeaderBytes}
}

// announceActive gossips the active state and marks the node ready.
func (n *Node) announceActive(ctx context.Context, p *nodeParts) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if err := p.member.SetState(sctx, membership.Active); err != nil {
		n.log.Warn("cannot announce the active state yet; peers will learn it by gossip", "err", err)
	}
	cancel()
	p.member.RebuildNow() // apply our own update now: once Start returns, this node's view shows it active
	n.ready.Store(true)
	p.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	n.log.Info("node ready", "node", p.store.NodeID(), "grpc", p.grpcLis.Addr().String(), "admin", p.adminLis.Addr().String(),
		"gossip", p.member.GossipAddr(), "memory_limit", p.store.Limit(), "startup", time.Since(p.startedAt).Round(time.Microsecond),
		"resp", respAddr(p), "resp_socket", respSocket(p))
}

// advertisedGRPC is the gRPC address gossiped to peers.
func (n *Node) advertisedGRPC(ctx context.Context, lis net.Listener, m membership.Config) (string, error) {
	if n.cfg.AdvertiseGRPCAddr != "" {
		return n.cfg.AdvertiseGRPCAddr, nil
	}
	host, port, _ := net.SplitHostPort(lis.Addr().String())
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		return lis.Addr().String(), nil
	}
	// Bound to all interfaces: advertise the host gossip advertises.
	ip, err := membership.AdvertiseIP(ctx, m)
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
	n.wg.Go(func() {
		if err := run(); err != nil {
			n.log.Error("server stopped", "server", name, "err", err)
		}
	})
}

// maintain sweeps stage tokens whose lease the store ended and expired
// lookup-lease records, every MaintenanceInterval (±10 %), until the node
// stops.
func (n *Node) maintain(svc *services.Services) {
	d := n.cfg.MaintenanceInterval
	for {
		t := time.NewTimer(d - d/10 + rand.N(d/5+1))
		select {
		case <-n.stopped.Done():
			t.Stop()
			return
		case <-t.C:
			svc.Sweep()
		}
	}
}

// syncNamespaces learns the namespaces registered before this node joined,
// from the first peer that answers; it gives up when the node stops.
func (n *Node) syncNamespaces(svc *services.Services) { svc.Coord.SyncNamespaces(n.stopped) }

// GRPCAddr is the address the gRPC server listens on (useful with port 0);
// "" before Start has opened it.
func (n *Node) GRPCAddr() string {
	if p := n.parts.Load(); p != nil {
		return p.grpcLis.Addr().String()
	}
	return ""
}

// AdminAddr is the address the admin server listens on (useful with port 0);
// "" before Start has opened it.
func (n *Node) AdminAddr() string {
	if p := n.parts.Load(); p != nil {
		return p.adminLis.Addr().String()
	}
	return ""
}

// GossipAddr is the address gossip listens on ("" before Start).
func (n *Node) GossipAddr() string {
	if p := n.parts.Load(); p != nil {
		return p.member.GossipAddr()
	}
	return ""
}

// Ring returns the current ring view (nil before Start).
func (n *Node) Ring() *ring.Ring {
	if p := n.parts.Load(); p != nil {
		return p.member.Ring()
	}
	return nil
}

// Store returns the node's local store (nil before Start).
func (n *Node) Store() *store.Store {
	if p := n.parts.Load(); p != nil {
		return p.store
	}
	return nil
}

// Ready reports whether the node serves.
func (n *Node) Ready() bool { return n.ready.Load() }

// Close stops the node: readiness goes false, the node leaves the gossip
// cluster, the gRPC and admin servers let in-flight requests finish until ctx
// ends, the store writes its catalog and closes, and every goroutine the node
// started has exited when Close returns. It undoes what Start opened, also
// when Start failed midway. Idempotent.
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
	p := n.opened
	if p == nil {
		p = &nodeParts{}
	}
	if p.health != nil {
		p.health.Shutdown() // clients see NOT_SERVING and move on
	}
	if p.mover != nil {
		p.mover.Close() // before the peer connections it copies over close
	}
	if p.svc != nil {
		p.svc.Spreader.Close() // likewise
	}
	if p.member != nil {
		// Peers notice a node that could not say goodbye through failure
		// detection; that is not a failed shutdown.
		if err := p.member.Close(ctx); err != nil {
			n.log.Warn("left the cluster without a confirmed goodbye", "err", err)
		}
	}
	errs := n.stopServers(ctx, p)
	n.stop()
	n.wg.Wait()
	if p.guard != nil {
		p.guard.Close() // every guarded listener is closed: the reserve descriptor goes too
	}
	if p.svc != nil {
		p.svc.Release()
	}
	if p.store != nil {
		if err := p.store.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := n.closeDisk(p); err != nil { // after the store, which offloads into it
		errs = append(errs, err)
	}
	if p.respUnmetrics != nil {
		p.respUnmetrics()
	}
	if p.unmetrics != nil {
		p.unmetrics()
	}
	n.closeErr = errors.Join(errs...)
	if n.started {
		n.log.Info("node stopped", "duration", time.Since(t).Round(time.Microsecond), "err", n.closeErr)
	}
	return n.closeErr
}

// stopServers drains the gRPC and admin servers until ctx ends, then stops
// them; listeners that no server took are closed.
func (n *Node) stopServers(ctx context.Context, p *nodeParts) []error {
	var errs []error
	if p.resp != nil {
		// First, with the socket: its commands call the coordinator.
		if err := p.resp.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if p.socket != nil {
		// First: requests in flight on it may still call the gRPC server.
		if err := p.socket.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case p.svc != nil && p.grpcLis != nil:
		done := make(chan struct{})
		go func() { p.svc.GRPC.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			p.svc.GRPC.Stop()
			<-done
			errs = append(errs, fmt.Errorf("cannot drain gRPC requests: %w", ctx.Err()))
		}
	}
	if p.grpcLis != nil {
		p.grpcLis.Close() // a server that never served leaves its listener open
	}
	switch {
	case p.adminSrv != nil:
		if err := p.adminSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("cannot drain admin server: %w", err))
			p.adminSrv.Close()
		}
	}
	if p.adminLis != nil {
		p.adminLis.Close()
	}
	if p.respLis != nil && p.resp == nil {
		p.respLis.Close() // a server that never served leaves its listener open
	}
	return errs
}
