package clustertest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvring/kvring/node/internal/moves"
	"github.com/kvring/kvring/ring"
)

// Cluster is what the nodes of an in-process cluster read of it: the ring
// view they share (swapped, as membership swaps it, by SetMembers),
// whether reads are unsettled, and who drains; and the Network between
// them. Safe for concurrent use; the readers never block.
type Cluster struct {
	Net       *Network
	ring      atomic.Pointer[ring.Ring]
	unsettled atomic.Bool
	moves     atomic.Pointer[moves.View]
	draining  sync.Map // node id → struct{}
	suspect   sync.Map // node id → struct{}
	// onChange are told of every ring swap (old, new), as a node's
	// membership tells its coordinator.
	mu       sync.Mutex
	onChange []func(old, r *ring.Ring)
}

// Suspect reports whether gossip suspects member id (SetSuspect); every
// node sees the same.
func (c *Cluster) Suspect(id string) bool { _, ok := c.suspect.Load(id); return ok }

// SetSuspect makes every node's gossip suspect member id (on) or hold it
// alive again, as memberlist does when its probes fail or it refutes.
func (c *Cluster) SetSuspect(id string, on bool) {
	if on {
		c.suspect.Store(id, struct{}{})
	} else {
		c.suspect.Delete(id)
	}
}

// NewCluster returns a Cluster with no ring yet and a healthy Network.
func NewCluster() *Cluster { return &Cluster{Net: NewNetwork()} }

// Ring is the current ring view (nil before SetMembers).
func (c *Cluster) Ring() *ring.Ring { return c.ring.Load() }

// Unsettled reports what SetUnsettled set (membership's settle window).
func (c *Cluster) Unsettled() bool { return c.unsettled.Load() }

// SetUnsettled makes reads ask every member (true) or only owners.
func (c *Cluster) SetUnsettled(on bool) { c.unsettled.Store(on) }

// Moves is what SetMoves set (nil before: reads ask owners only), as a
// node's membership builds it from its peers' hand-off summaries.
func (c *Cluster) Moves() *moves.View { return c.moves.Load() }

// SetMoves makes v every node's view of who may hold chunks of partitions
// they do not own.
func (c *Cluster) SetMoves(v *moves.View) { c.moves.Store(v) }

// Draining reports whether node id drains.
func (c *Cluster) Draining(id string) bool { _, ok := c.draining.Load(id); return ok }

// SetDraining marks node id as draining, or not.
func (c *Cluster) SetDraining(id string, on bool) {
	if on {
		c.draining.Store(id, struct{}{})
	} else {
		c.draining.Delete(id)
	}
}

// Store makes r the ring every node reads, without telling anyone (as a
// ring swapped behind the coordinators' backs), and maps its members'
// addresses on the Network.
func (c *Cluster) Store(r *ring.Ring) { c.Swap(r) }

// Swap is Store, returning the ring it replaced.
func (c *Cluster) Swap(r *ring.Ring) *ring.Ring {
	for _, m := range r.Members() {
		c.Net.Name(m.Addr, m.ID)
	}
	return c.ring.Swap(r)
}

// OnRingChange adds f to the functions told of every ring swap.
func (c *Cluster) OnRingChange(f func(old, r *ring.Ring)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onChange = append(c.onChange, f)
}

// SetMembers makes members the ring of every node, at epoch, with rf
// owners per chunk at most (the ring's replication factor), maps their
// addresses on the Network, and tells OnRingChange's functions.
func (c *Cluster) SetMembers(t testing.TB, members []ring.Member, epoch uint64, rf int) *ring.Ring {
	t.Helper()
	cfg := ring.DefaultConfig()
	cfg.ReplicationFactor = rf
	r, err := ring.New(members, epoch, cfg)
	if err != nil {
		t.Fatalf("cannot build the ring of %d members: %v", len(members), err)
	}
	old := c.Swap(r)
	c.mu.Lock()
	fs := append([]func(old, r *ring.Ring){}, c.onChange...)
	c.mu.Unlock()
	for _, f := range fs {
		f(old, r)
	}
	return r
}

// Listen listens on 127.0.0.1 on a port the kernel picks, until the test
// ends.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cannot listen on 127.0.0.1: %v", err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	return lis
}
