package coord

import (
	"context"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
)

// coordLease records the nodes that pinned chunks under a Lookup lease, so
// that ReleaseLease can unpin them early, and the client the lease was
// granted to, so that the lease ends when that client goes (ClientGone).
type coordLease struct {
	nodes   []ring.Member
	expires time.Time
	client  string // package tenant's name; "" for none
}

// recordLease remembers the nodes that pinned under lease id, for client,
// until ttl ends.
func (c *Coordinator) recordLease(id uint64, nodes []ring.Member, ttl time.Duration, client string) {
	c.mu.Lock()
	c.leases[id] = coordLease{nodes: nodes, expires: c.cfg.Now().Add(ttl), client: client}
	c.mu.Unlock()
}

// ClientGone ends the lookup leases this coordinator granted to client
// (package tenant's name): the node calls it when the client's last
// connection closes, so that pins nobody can use or release any more do not
// hold memory other clients need until their leases expire. The unpinning
// runs on a goroutine Close waits for, bounded by PeerTimeout; ClientGone
// does not block.
func (c *Coordinator) ClientGone(client string) {
	if client == "" {
		return
	}
	var ids []uint64
	c.mu.Lock()
	for id, l := range c.leases {
		if l.client == client {
			ids = append(ids, id)
		}
	}
	c.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	c.bg.start(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.PeerTimeout)
		defer cancel()
		for _, id := range ids {
			c.releaseLease(ctx, id)
		}
	})
}

// ReleaseLease unpins a Lookup lease on every node that pinned under it,
// and reports whether the lease was known (not expired or foreign). Blocks
// for up to PeerTimeout per node.
func (c *Coordinator) ReleaseLease(ctx context.Context, id uint64) bool {
	return c.releaseLease(ctx, id)
}

// releaseLease unpins a Lookup lease on every node that pinned under it.
// It returns false for an unknown (expired or foreign) lease.
func (c *Coordinator) releaseLease(ctx context.Context, id uint64) bool {
	c.mu.Lock()
	l, ok := c.leases[id]
	delete(c.leases, id)
	c.mu.Unlock()
	if !ok {
		return false
	}
	for _, m := range l.nodes {
		c.unpinOn(ctx, m, id)
	}
	return true
}

// unpinOn ends lease id on node m (in process for this node), bounded by
// peerTimeout. A node that does not answer lets the lease expire by itself.
func (c *Coordinator) unpinOn(ctx context.Context, m ring.Member, id uint64) {
	if m.ID == c.cfg.Self {
		c.local.Unpin([]uint64{id})
		return
	}
	pc, err := c.peer(m)
	if err != nil {
		return
	}
	pctx, cancel := c.peerCtx(ctx)
	defer cancel()
	_, err = pc.Unpin(pctx, &kvringv1.UnpinRequest{Caller: c.caller(), LeaseIds: []uint64{id}})
	c.peers.note(ctx, m, err)
}

// Sweep forgets the records of lookup leases that have ended (the owners'
// pins end by themselves). The node's maintenance loop calls it.
func (c *Coordinator) Sweep() {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, l := range c.leases {
		if now.After(l.expires) {
			delete(c.leases, id)
		}
	}
}
