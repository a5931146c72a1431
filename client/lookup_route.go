package client

import (
	"context"
	"time"

	"google.golang.org/grpc"
)

// Lookups are routed like gets: to the primary owner of the first id's
// placement key (or a member of its spread set when that group is known to
// be spread, spread.go), which answers the first wave of the lookup from its
// own store (with groups, often the whole lookup) instead of the connected
// node asking it: one hop fewer. An owner that cannot take the call leaves
// it to the connected node. A lease granted by an owner must be released
// there (leases live where they were granted), so the client remembers
// which node granted it until it ends.

// lookupConn returns the connection to the primary owner of key, or nil
// when the lookup goes over cc (routing off, no view, cc is that owner).
func (c *Client) lookupConn(cc *grpc.ClientConn, namespace string, key []byte) *grpc.ClientConn {
	shares := c.route.split(cc, namespace, 1, func(int) []byte { return key }, true)
	if len(shares) != 1 || shares[0].main {
		return nil
	}
	occ, err := c.route.ownerConn(shares[0].owner.Addr)
	if err != nil {
		return nil
	}
	return occ
}

// ownerAttempt bounds a lookup's call to the key's owner to half the time
// left, so that an owner that hangs (stopping, or overloaded) leaves the
// other half for the same call through the connection's node (an owner
// that is alive answers in time: a node answers a lookup before the
// deadline it is given, with the prefix it found so far).
func ownerAttempt(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Until(dl)/2)
}

// leaseGrant is where a lookup lease lives and until when.
type leaseGrant struct {
	addr    string
	expires time.Time
}

// leaseAt remembers that node addr granted lease for ttl, forgetting grants
// that have ended.
func (c *Client) leaseAt(lease uint64, addr string, ttl time.Duration) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leases == nil {
		c.leases = map[uint64]leaseGrant{}
	}
	for id, g := range c.leases {
		if now.After(g.expires) {
			delete(c.leases, id)
		}
	}
	c.leases[lease] = leaseGrant{addr: addr, expires: now.Add(ttl)}
}

// leaseNode returns and forgets the node that granted lease ("" when the
// connected node did, or the lease is unknown).
func (c *Client) leaseNode(lease uint64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.leases[lease]
	delete(c.leases, lease)
	return g.addr
}
