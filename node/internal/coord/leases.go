package coord

import (
	"context"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
)

// coordLease records the nodes that pinned chunks under a Lookup lease, so
// that ReleaseLease can unpin them early.
type coordLease struct {
	nodes   []ring.Member
	expires time.Time
}

// recordLease remembers the nodes that pinned under lease id until ttl ends.
func (c *Coordinator) recordLease(id uint64, nodes []ring.Member, ttl time.Duration) {
	c.mu.Lock()
	c.leases[id] = coordLease{nodes: nodes, expires: c.cfg.Now().Add(ttl)}
	c.mu.Unlock()
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
		if m.ID == c.cfg.Self {
			c.local.Unpin([]uint64{id})
			continue
		}
		if pc, err := c.peer(m); err == nil {
			_, _ = pc.Unpin(ctx, &kvringv1.UnpinRequest{Caller: c.caller(), LeaseIds: []uint64{id}})
		}
	}
	return true
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
