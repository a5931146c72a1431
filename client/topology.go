package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/kvring/kvring/internal/connpool"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// Timing of the ring view. The view is a hint (any node coordinates any call), so none of this is a setting.
const (
	// topologyInterval is how often the view is fetched again when nothing prompts it (jittered by
	// ConnConfig.Jitter).
	topologyInterval = 10 * time.Second
	// topologyMinGap spaces fetches prompted by replies, so that nodes whose epochs keep moving (a cluster
	// converging) cannot make the client ask in a loop.
	topologyMinGap = 250 * time.Millisecond
	// topologyTimeout bounds one Topology call.
	topologyTimeout = 5 * time.Second
)

// errRoutingDisabled is returned by RefreshRouting when Config.DisableRouting is set.
var errRoutingDisabled = errors.New("client: routing is disabled (Config.DisableRouting)")

// RoutingState is the ring view a client routes puts and gets by (see Config.DisableRouting).
type RoutingState struct {
	// Enabled is false when Config.DisableRouting is set: every call then goes through the connected node.
	Enabled bool
	// Epoch is the ring epoch of the node the view came from; 0 without a view. Epochs are local to each node.
	Epoch uint64
	// From is the node that answered the Topology call the view came from.
	From Node
	// Members are the ring's members, sorted by ID. Empty without a view: every call then goes through the
	// connected node.
	Members []Node
	// Fetched is when the view was last fetched; zero without a view.
	Fetched time.Time
}

// Routing returns the ring view the client routes by now. It does not block.
func (c *Client) Routing() RoutingState {
	if c.route == nil {
		return RoutingState{}
	}
	st := RoutingState{Enabled: true}
	t := c.route.view.Load()
	if t == nil || t.ring == nil {
		return st
	}
	st.Epoch, st.Fetched = t.ring.Epoch(), t.fetched
	st.From = Node{ID: t.self, Addr: t.via.Target()}
	for _, m := range t.ring.Members() {
		st.Members = append(st.Members, Node{ID: m.ID, Addr: m.Addr})
	}
	return st
}

// RefreshRouting fetches the ring view from the connected node now and waits until it is in use. The client
// does this by itself after connecting, when a node's replies carry a new epoch and every ~10 s; call it to act
// on a known view (tests, tools). Safe for concurrent use.
func (c *Client) RefreshRouting(ctx context.Context) error {
	if c.route == nil {
		return errRoutingDisabled
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	return c.route.refresh(ctx)
}

// topology is one ring view, immutable once published.
type topology struct {
	ring    *ring.Ring       // nil: no members or an unusable view; route nothing
	self    string           // id of the node that answered
	via     *grpc.ClientConn // the main connection it answered on
	fetched time.Time
}

// router keeps the client's ring view fresh and the connections to owners (route.go uses both). One goroutine
// (run) fetches the view after each connection, when kicked and periodically; close stops it and waits.
// Methods are safe for concurrent use; none blocks except refresh and close.
type router struct {
	conn *conn
	log  *slog.Logger
	pool *connpool.Pool // one connection per owner address (ownerDialOptions)

	view atomic.Pointer[topology]
	kick chan struct{} // cap 1: fetch the view now
	// hints are the groups lookups reported spread (spread.go).
	hints spreadHints

	refreshMu sync.Mutex // serialises refresh
	mu        sync.Mutex
	epochs    map[string]uint64 // the epoch each node's replies carried last, by address
	unusable  string            // why the last view could not be used; logged once per cause

	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

func newRouter(cn *conn, log *slog.Logger) *router {
	// An owner gets as long to answer as a node gets to connect and pass a health check.
	answer := cn.cfg.DialTimeout + cn.cfg.ProbeTimeout
	ctx, cancel := context.WithCancel(context.Background())
	r := &router{conn: cn, log: log, pool: connpool.New(ownerDialOptions(cn, answer)...), kick: make(chan struct{}, 1),
		epochs: map[string]uint64{}, stop: cancel, done: make(chan struct{})}
	r.kick <- struct{}{} // fetch at once if the connection is up already; onState prompts when it comes up
	go r.run(ctx)
	return r
}

// prompt asks the loop to fetch the view soon. It never blocks.
func (r *router) prompt() {
	select {
	case r.kick <- struct{}{}:
	default: // a fetch is already due
	}
}

// onState is hooked into ConnConfig.OnStateChange: every new connection fetches the view. It never blocks.
func (r *router) onState(s ConnState) {
	if s.Status == ConnConnected {
		r.prompt()
	}
}

// observe records the epoch of a reply from the node at addr and prompts a fetch when that node's epoch
// changed since its previous reply (or since the view it gave). Epochs are local to each node, so only a
// node's own epochs are compared. A nil router (routing disabled) ignores it.
func (r *router) observe(addr string, epoch uint64) {
	if r == nil || epoch == 0 {
		return
	}
	r.mu.Lock()
	prev, ok := r.epochs[addr]
	r.epochs[addr] = epoch
	r.mu.Unlock()
	if ok && prev != epoch {
		r.prompt()
	}
}

// run fetches the view when prompted or every topologyInterval, at most once per topologyMinGap, until close. A
// prompt while the connection is down is dropped (the connection prompts again once it is up), so the first view
// is fetched as soon as the client is connected.
func (r *router) run(ctx context.Context) {
	defer close(r.done)
	for {
		jitter := r.conn.cfg.Jitter
		t := time.NewTimer(time.Duration(float64(topologyInterval) * (1 + jitter*(2*rand.Float64()-1))))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.kick:
		case <-t.C:
		}
		t.Stop()
		if r.conn.State().Status != ConnConnected {
			// Nothing to ask yet, and no fetch to space: the connection prompts (onState) as soon as it is up.
			// Waiting topologyMinGap here left a new client unrouted for its first 250 ms.
			continue
		}
		if err := r.refresh(ctx); err != nil && ctx.Err() == nil {
			// The connection logs its own troubles; calls keep going through the connected node.
			r.log.Debug("cannot fetch the kvring ring view; keeping the previous one", "err", err)
		}
		if !connSleep(ctx, topologyMinGap) {
			return
		}
	}
}

// refresh fetches the view from the connected node and publishes it. A failed call keeps the previous view
// (it is a hint; calls fall back by themselves); a view the client cannot use replaces it with none.
func (r *router) refresh(ctx context.Context) error {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	cc, err := r.conn.ready(ctx)
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, topologyTimeout)
	defer cancel()
	resp, err := kvringv1.NewCacheClient(cc).Topology(tctx, &kvringv1.TopologyRequest{})
	if transfer.Code(err) == codes.Unimplemented {
		r.publish(&topology{via: cc, fetched: time.Now()}, fmt.Sprintf("node %s does not serve Topology", cc.Target()))
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot fetch the ring view from %s: %w", cc.Target(), transfer.FromStatus(err))
	}
	t, why := r.build(resp, cc)
	r.publish(t, why)
	return nil
}

// build turns a Topology answer into a view, reusing the current ring when nothing that places keys changed.
// why is non-empty when the answer cannot be routed by.
func (r *router) build(resp *kvringv1.TopologyResponse, cc *grpc.ClientConn) (t *topology, why string) {
	t = &topology{self: resp.GetSelf().GetNodeId(), via: cc, fetched: time.Now()}
	if len(resp.GetMembers()) == 0 {
		return t, ""
	}
	s := resp.GetRing()
	cfg := ring.Config{PartitionCount: int(s.GetPartitionCount()), ReplicationFactor: int(s.GetReplicationFactor()),
		Load: s.GetLoad(), VirtualNodes: int(s.GetVirtualNodes()), Hasher: s.GetHasher(), Placement: ring.PlacementV2}
	// The answer does not name the placement version the cluster agreed on: the fingerprint tells it.
	for v := ring.MinPlacement; v <= ring.MaxPlacement; v++ {
		c := cfg
		c.Placement = v
		if c.Fingerprint() == s.GetFingerprint() {
			cfg = c
			break
		}
	}
	if fp := cfg.Fingerprint(); fp != s.GetFingerprint() {
		return t, fmt.Sprintf("node %s places keys differently (ring fingerprint %q, this client computes %q): upgrade the client",
			cc.Target(), s.GetFingerprint(), fp)
	}
	members := make([]ring.Member, len(resp.GetMembers()))
	for i, m := range resp.GetMembers() {
		members[i] = ring.Member{ID: m.GetNodeId(), Addr: m.GetGrpcAddr()}
	}
	slices.SortFunc(members, func(a, b ring.Member) int { return cmp.Compare(a.ID, b.ID) })
	if old := r.view.Load(); old != nil && old.ring != nil && old.ring.Epoch() == resp.GetEpoch() &&
		old.ring.Config() == cfg && slices.Equal(old.ring.Members(), members) {
		t.ring = old.ring
		return t, ""
	}
	rg, err := ring.New(members, resp.GetEpoch(), cfg)
	if err != nil {
		return t, fmt.Sprintf("cannot rebuild the ring of node %s: %v", cc.Target(), err)
	}
	t.ring = rg
	return t, ""
}

// publish makes t the view, records its node's epoch and closes connections to nodes that left. why (non-empty:
// t routes nothing because of it) is logged once per cause.
func (r *router) publish(t *topology, why string) {
	old := r.view.Swap(t)
	live := map[string]bool{}
	if t.ring != nil {
		for _, m := range t.ring.Members() {
			live[m.Addr] = true
		}
	}
	r.mu.Lock()
	for addr := range r.epochs {
		if !live[addr] && addr != t.via.Target() {
			delete(r.epochs, addr)
		}
	}
	if t.ring != nil {
		r.epochs[t.via.Target()] = t.ring.Epoch()
	}
	logWhy := why != "" && why != r.unusable
	r.unusable = why
	r.mu.Unlock()
	r.pool.Keep(live)

	switch {
	case logWhy:
		r.log.Warn("cannot route by the kvring ring view; every call goes through the connected node", "reason", why)
	case t.ring != nil && (old == nil || old.ring != t.ring):
		r.log.Info("routing by kvring ring view", "from", t.via.Target(), "epoch", t.ring.Epoch(), "members", t.ring.Len())
	}
}

// ownerConn returns the pool's connection to the owner at addr. Once the router is closed it fails like the
// main connection after close: Canceled, wrapping errConnClosed.
func (r *router) ownerConn(addr string) (*grpc.ClientConn, error) {
	cc, err := r.pool.Get(addr)
	if errors.Is(err, connpool.ErrClosed) {
		return nil, withCode(fmt.Errorf("owner %s: %w", addr, errConnClosed))
	}
	return cc, err
}

// close stops the loop, waits for it and closes the owner connections. Idempotent.
func (r *router) close() {
	r.closeOnce.Do(func() {
		r.stop()
		<-r.done
		r.pool.Close()
	})
}
