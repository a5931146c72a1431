package coord

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/moves"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/owner"
	"github.com/kvring/kvring/node/internal/spread"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// DefaultMinPutRate is the usual Config.MinPutRate: 256 KiB/s, far below any
// engine's network, far above a trickle.
const DefaultMinPutRate = 256 << 10

// Config configures a Coordinator. Every field is required unless it says
// otherwise.
type Config struct {
	// Self is this node's id.
	Self string
	// Ring returns the current ring view; it must not block.
	Ring func() *ring.Ring
	// Unsettled reports whether reads should also ask members that do not
	// own a chunk (shortly after a ring change). Optional: nil means never.
	Unsettled func() bool
	// Moves tells which members may hold chunks of a partition they do not
	// own (their hand-off summaries, package moves): reads ask them too,
	// per partition. Optional: nil asks owners only (or every member while
	// Unsettled).
	Moves func() *moves.View
	// Owner is this node's owner, driven in process for the chunks this node
	// owns.
	Owner    *owner.Owner
	Registry *namespace.Registry
	Log      *slog.Logger
	// MaxBatch is the most chunks one call may carry.
	MaxBatch int
	// CommitTimeout bounds the commit and abort calls of a two-phase write
	// (they run even when the engine's call was cancelled after prepare) and
	// the wait for another writer of the same chunks.
	CommitTimeout time.Duration
	// PeerTimeout bounds each exchange with one owner, so an owner that is
	// stuck (not just down) is skipped within the engine's deadline.
	PeerTimeout time.Duration
	// CoalesceHas merges concurrent unpinned Has requests to the same owner
	// into one call (hasCoalescer): fewer peer calls under many concurrent
	// lookups, but a request that finds a call in flight waits for it.
	// Default false: each request is its own call.
	CoalesceHas bool
	// Draining reports whether a member drains (it takes no new chunks as
	// an owner; writes go to the next owners, reads ask both). Optional: nil
	// means no member drains. It must not block.
	Draining func(id string) bool
	// Suspect reports whether gossip may hold a member down: suspected (a
	// probe of it failed and it has not answered one since), or declared
	// dead while the ring still lists it. A write stops waiting for such an
	// owner (suspect.go).
	// Optional: nil means gossip is never asked. It must not block.
	Suspect func(id string) bool
	// Died reports whether a member that left the ring was declared dead
	// rather than drained: it may come back with what it held, so a read
	// that finds a chunk nowhere else answers "unavailable", not "not
	// found", while it is remembered as departed (departed.go). Optional:
	// nil means no departed member counts. It must not block.
	Died func(id string) bool
	// IdleTimeout ends a put whose engine sends no message for this long,
	// before its begin message or in its data phase (its staged chunks are
	// aborted). 0: no limit.
	IdleTimeout time.Duration
	// MinPutRate ends a put whose data phase, once IdleTimeout has passed
	// since it began, has received fewer than MinPutRate bytes per second
	// (its staged chunks are aborted): a trickling engine cannot hold its
	// reservations for the whole stage lease. 0: no minimum.
	MinPutRate int64
	// MaxAwaitingBegin is how many of one client's put streams may wait
	// for their begin message at once with a reader each (beginGate); more
	// wait for one of those to end, and are refused with ResourceExhausted
	// at their begin deadline. 0: no bound.
	MaxAwaitingBegin int
	// BroadcastTimeout bounds how long a namespace registration waits for
	// the other members to answer.
	BroadcastTimeout time.Duration
	// MaxPin caps a lookup lease.
	MaxPin time.Duration
	// Defaults are the replication settings of new namespaces.
	Defaults namespace.Defaults
	// Limits are announced to clients when they register.
	Limits *kvringv1.Limits
	// Now is the clock of lookup-lease records and outage durations; the
	// node passes the same clock to the store.
	Now     func() time.Time
	Metrics *metrics.Set
	// Spread is what this node knows of hot groups spread to more members
	// (package spread): reads of a spread group ask one of its spread
	// members first, and what holders answer about spreading is recorded
	// in it. Optional: nil reads every group from its owners.
	Spread *spread.Table
	// Load counts the engine read calls this node serves (lookups, gets),
	// for the load hint lookups answer; the owner counts the peer ones on
	// the same Meter. Loads keeps the hints peers answered, for choosing
	// among a spread group's members. Optional: nil counts nothing, knows
	// nothing of load (the choice is then random).
	Load  *spread.Meter
	Loads *spread.Loads
	// PeerDialOptions are added to the options of the connections to peers:
	// the node's TLS credentials and cluster key (node/internal/security).
	PeerDialOptions []grpc.DialOption
}

// Coordinator serves engines on every node: it places each chunk on its
// owners, runs two-phase writes, fans lookups out and reads with owner
// fallback. It holds no chunk bytes beyond the frame in flight (and one chunk
// read from a peer while it is verified). The only goroutine that may
// outlive a call is the receiver of a put abandoned for idleness or a slow
// stream, which ends when gRPC cancels that stream; Close waits for it. Safe for
// concurrent use; Close closes its peer connections.
type Coordinator struct {
	cfg   Config
	local *owner.Owner
	reg   *namespace.Registry
	log   *slog.Logger
	m     *metrics.Set
	pool  *peerPool
	// peers logs runs of failures to reach a peer once, not per request.
	peers *peerFailures
	// has merges concurrent Has requests to the same peer; it starts no
	// goroutine.
	has *hasCoalescer
	// open opens the session of a write with one owner (openSession;
	// tests of the write put fake owners in its place).
	open sessionOpener
	// departed are the members that left the ring lately, for the reason
	// of a read that finds a chunk nowhere.
	departed departures

	// recv are the receivers of puts' streams (idleWatch); Close waits for
	// them.
	recv receivers
	// bg are the releases of departed clients' leases (ClientGone); Close
	// waits for them.
	bg receivers
	// begins bounds each client's put streams awaiting their begin
	// message.
	begins beginGate

	mu     sync.Mutex
	leases map[uint64]coordLease
}

// New returns a Coordinator. It does no I/O: peer connections are made on
// first use.
func New(cfg Config) *Coordinator {
	has := newHasCoalescer(cfg.MaxBatch, cfg.PeerTimeout, cfg.Metrics.HasCoalesced)
	has.off = !cfg.CoalesceHas
	c := &Coordinator{cfg: cfg, local: cfg.Owner, reg: cfg.Registry, log: cfg.Log, m: cfg.Metrics,
		pool: newPeerPool(cfg.PeerDialOptions...), peers: newPeerFailures(cfg.Log, cfg.Now, cfg.Metrics.PeerFailures),
		has: has, leases: make(map[uint64]coordLease), begins: beginGate{max: cfg.MaxAwaitingBegin}}
	c.open = c.openSession
	return c
}

// Close waits for the receivers of abandoned puts (their streams end with
// the gRPC server, which the caller stops first) and closes the connections
// to peers; later peer calls fail with Unavailable. Idempotent.
func (c *Coordinator) Close() {
	c.recv.close()
	c.bg.close()
	c.pool.close()
}

// RingChanged closes the connections to, and forgets the outages of, peers
// that are no longer members of r, and remembers them as departed from old
// (a read that misses everywhere names a departed owner it could not ask).
// The node calls it after every ring rebuild, with the replaced ring; it
// never blocks for long.
func (c *Coordinator) RingChanged(old, r *ring.Ring) {
	c.departed.ringChanged(old, r, c.cfg.Now(), c.cfg.Died)
	live, liveIDs := map[string]bool{}, map[string]bool{}
	for _, m := range r.Members() {
		live[m.Addr] = true
		liveIDs[m.ID] = true
	}
	c.pool.keep(live)
	c.peers.keep(liveIDs)
	c.cfg.Loads.Forget(liveIDs)
}

// Unreachable returns how many peers are in an outage now.
func (c *Coordinator) Unreachable() int { return c.peers.unreachable() }

func (c *Coordinator) epoch() uint64 {
	if r := c.cfg.Ring(); r != nil {
		return r.Epoch()
	}
	return 0
}

// isUnsettled reports whether reads should also ask members that do not
// own a chunk: the ring changed, or this node started, moments ago.
func (c *Coordinator) isUnsettled() bool { return c.cfg.Unsettled != nil && c.cfg.Unsettled() }

// movesView is what this node knows of who may hold chunks of partitions
// they do not own (nil: nothing, reads ask owners).
func (c *Coordinator) movesView() *moves.View {
	if c.cfg.Moves == nil {
		return nil
	}
	return c.cfg.Moves()
}

func (c *Coordinator) caller() *kvringv1.PeerCaller {
	return &kvringv1.PeerCaller{NodeId: c.cfg.Self, Epoch: c.epoch()}
}

// currentRing returns the ring, or Unavailable when it has no members.
func (c *Coordinator) currentRing() (*ring.Ring, error) {
	r := c.cfg.Ring()
	if r == nil || r.Len() == 0 {
		return nil, fmt.Errorf("%w: the ring has no members", transfer.ErrUnavailable)
	}
	return r, nil
}

// peerCtx bounds one exchange with an owner by PeerTimeout (or the caller's
// deadline, if sooner).
func (c *Coordinator) peerCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.PeerTimeout)
}

// peer returns the Peer client of member m.
func (c *Coordinator) peer(m ring.Member) (kvringv1.PeerClient, error) { return c.pool.client(m.Addr) }

// nsRef is the namespace reference of a record, as peers are sent it.
func nsRef(rec *kvringv1.NamespaceRecord) *kvringv1.NamespaceRef {
	return &kvringv1.NamespaceRef{Name: rec.GetName(), Fingerprint: rec.GetFingerprint()}
}

// replication returns a record's replication factor and min replicas (at
// least 1 each).
func replication(rec *kvringv1.NamespaceRecord) (replicas, minReplicas int) {
	return int(max(1, rec.GetReplicationFactor())), int(max(1, rec.GetMinReplicas()))
}

// IsDown reports whether peer id is in an outage now (its last call could
// not reach it). Never blocks.
func (c *Coordinator) IsDown(id string) bool { return c.peers.isDown(id) }
