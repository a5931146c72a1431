package node

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// coordinator serves engines on every node: it places each chunk on its
// owners, runs two-phase writes, fans lookups out and reads with owner
// fallback. It holds no chunk bytes beyond the frame in flight (and one chunk
// read from a peer while it is verified). Safe for concurrent use.
type coordinator struct {
	self string // this node's id
	ring func() *ring.Ring
	// unsettled reports whether reads should also ask non-owners (shortly
	// after a ring change); nil: never.
	unsettled func() bool
	local     *owner
	pool      *peerPool
	reg       *registry
	log       *slog.Logger
	maxBatch  int
	// commitTimeout bounds commit and abort calls, which must run even when
	// the engine's call was cancelled after the prepare phase.
	commitTimeout time.Duration
	// peerTimeout bounds each exchange with one owner, so an owner that is
	// stuck (not just down) is skipped within the engine's deadline.
	peerTimeout time.Duration
	// maxPin caps a lookup lease.
	maxPin time.Duration
	now    func() time.Time
	m      *metrics
	// peers logs runs of failures to reach a peer once, not per request.
	peers *peerFailures

	mu     sync.Mutex
	leases map[uint64]coordLease
}

// coordLease records the nodes that pinned chunks under a Lookup lease.
type coordLease struct {
	nodes   []ring.Member
	expires time.Time
}

func (c *coordinator) epoch() uint64 {
	if r := c.ring(); r != nil {
		return r.Epoch()
	}
	return 0
}

// isUnsettled reports whether reads should also ask members that do not
// own a chunk: the ring changed, or this node started, moments ago.
func (c *coordinator) isUnsettled() bool { return c.unsettled != nil && c.unsettled() }

func (c *coordinator) caller() *kvringv1.PeerCaller {
	return &kvringv1.PeerCaller{NodeId: c.self, Epoch: c.epoch()}
}

// session opens a put session with an owner.
func (c *coordinator) session(m ring.Member) (putSession, error) {
	if m.ID == c.self {
		return &localSession{o: c.local}, nil
	}
	pc, err := c.pool.client(m.Addr)
	if err != nil {
		return nil, err
	}
	return &remoteSession{c: pc, caller: c.caller(), timeout: c.peerTimeout}, nil
}

// currentRing returns the ring, or Unavailable when it has no members.
func (c *coordinator) currentRing() (*ring.Ring, error) {
	r := c.ring()
	if r == nil || r.Len() == 0 {
		return nil, fmt.Errorf("%w: the ring has no members", transfer.ErrUnavailable)
	}
	return r, nil
}

// peerCtx bounds one exchange with an owner by peerTimeout (or the caller's
// deadline, if sooner).
func (c *coordinator) peerCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.peerTimeout)
}

// newLeaseID returns a random non-zero lease id.
func newLeaseID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// releaseLease unpins a Lookup lease on every node that pinned under it.
// It returns false for an unknown (expired or foreign) lease.
func (c *coordinator) releaseLease(ctx context.Context, id uint64) bool {
	c.mu.Lock()
	l, ok := c.leases[id]
	delete(c.leases, id)
	c.mu.Unlock()
	if !ok {
		return false
	}
	for _, m := range l.nodes {
		if m.ID == c.self {
			c.local.unpin([]uint64{id})
			continue
		}
		if pc, err := c.pool.client(m.Addr); err == nil {
			_, _ = pc.Unpin(ctx, &kvringv1.UnpinRequest{Caller: c.caller(), LeaseIds: []uint64{id}})
		}
	}
	return true
}

// sweep forgets expired leases (the owners' pins expire by themselves).
func (c *coordinator) sweep(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, l := range c.leases {
		if now.After(l.expires) {
			delete(c.leases, id)
		}
	}
}
