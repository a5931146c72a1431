package clustertest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
)

// Fault is what happens on the link from one node to another.
type Fault int

const (
	// Healthy: bytes flow.
	Healthy Fault = iota
	// Cut: the link is partitioned. New connections are refused and open
	// ones are closed (their calls fail with Unavailable).
	Cut
	// Hang: bytes sent over the link are held, undelivered, until the link
	// is healed or the connection closes; new connections are accepted and
	// hang the same way. A peer that accepts a call and never answers.
	Hang
)

// link is a direction between two nodes, by node id.
type link struct{ from, to string }

// linkState is a link's fault and delay.
type linkState struct {
	fault Fault
	delay time.Duration
}

// Network carries the connections nodes dial to their peers and applies
// the faults the test sets on each direction between two nodes. Nodes are
// named by id; an address is mapped to its node by Name. Safe for
// concurrent use.
type Network struct {
	mu      sync.Mutex
	names   map[string]string // address → node id
	links   map[link]linkState
	conns   map[*faultConn]struct{}
	changed chan struct{} // closed and replaced on every change of a link
	frames  frameCounts
}

// NewNetwork returns a Network whose links are all healthy.
func NewNetwork() *Network {
	return &Network{names: map[string]string{}, links: map[link]linkState{}, conns: map[*faultConn]struct{}{},
		changed: make(chan struct{})}
}

// Name maps addr to node id, for the faults set by id.
func (n *Network) Name(addr, id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.names[addr] = id
}

// DialOption is the gRPC dial option of the connections node from makes
// to its peers: they pass through the Network's faults.
func (n *Network) DialOption(from string) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return n.Dial(ctx, from, addr) })
}

// Dial connects node from to addr over TCP, through the faults of the
// link between them. A cut link refuses the connection.
func (n *Network) Dial(ctx context.Context, from, addr string) (net.Conn, error) {
	n.mu.Lock()
	to := n.names[addr]
	st := n.links[link{from, to}]
	n.mu.Unlock()
	if st.fault == Cut {
		return nil, fmt.Errorf("dial %s (%s) from %s: the link is cut: %w", addr, to, from, syscall.ECONNREFUSED)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	fc := &faultConn{Conn: c, n: n, out: link{from, to}, in: link{to, from}, closed: make(chan struct{}),
		sent: frameReader{counts: &n.frames, sent: true, skip: len(http2.ClientPreface)}, received: frameReader{counts: &n.frames}}
	n.mu.Lock()
	n.conns[fc] = struct{}{}
	n.mu.Unlock()
	return fc, nil
}

// set changes the state of the link from → to and wakes the connections
// that wait on the Network; a cut closes the link's open connections.
func (n *Network) set(from, to string, change func(*linkState)) {
	n.mu.Lock()
	st := n.links[link{from, to}]
	change(&st)
	n.links[link{from, to}] = st
	var doomed []*faultConn
	if st.fault == Cut {
		for c := range n.conns {
			if c.out == (link{from, to}) || c.in == (link{from, to}) {
				doomed = append(doomed, c)
			}
		}
	}
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
	for _, c := range doomed {
		_ = c.Close()
	}
}

// Cut partitions a and b, both ways.
func (n *Network) Cut(a, b string) {
	n.set(a, b, func(s *linkState) { s.fault = Cut })
	n.set(b, a, func(s *linkState) { s.fault = Cut })
}

// Partition cuts every link between a member of side and a member of other.
func (n *Network) Partition(side, other []string) {
	for _, a := range side {
		for _, b := range other {
			n.Cut(a, b)
		}
	}
}

// Hang holds every byte sent from node from to node to until Heal.
func (n *Network) Hang(from, to string) { n.set(from, to, func(s *linkState) { s.fault = Hang }) }

// Delay delivers every write from node from to node to d late.
func (n *Network) Delay(from, to string, d time.Duration) {
	n.set(from, to, func(s *linkState) { s.delay = d })
}

// Drop closes the open connections between a and b once (what was in
// flight is lost, calls on them fail); new connections work.
func (n *Network) Drop(a, b string) {
	n.mu.Lock()
	var doomed []*faultConn
	for c := range n.conns {
		if c.out == (link{a, b}) || c.out == (link{b, a}) {
			doomed = append(doomed, c)
		}
	}
	n.mu.Unlock()
	for _, c := range doomed {
		_ = c.Close()
	}
}

// Heal makes both directions between a and b healthy again; held bytes
// are delivered.
func (n *Network) Heal(a, b string) {
	n.set(a, b, func(s *linkState) { *s = linkState{} })
	n.set(b, a, func(s *linkState) { *s = linkState{} })
}

// HealAll makes every link healthy.
func (n *Network) HealAll() {
	n.mu.Lock()
	ls := make([]link, 0, len(n.links))
	for l := range n.links {
		ls = append(ls, l)
	}
	n.mu.Unlock()
	for _, l := range ls {
		n.Heal(l.from, l.to)
	}
}

// state returns the state of l and the channel closed at its next change.
func (n *Network) state(l link) (linkState, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.links[l], n.changed
}

// faultConn is one connection a node dialed: its writes go over out,
// its reads come over in, each subject to that link's fault.
type faultConn struct {
	net.Conn
	n       *Network
	out, in link
	once    sync.Once
	closed  chan struct{}
	// sent and received count the frames of each direction (one Write
	// and one Read at a time each, as gRPC's transport calls them).
	sent, received frameReader
}

// pass waits until l lets bytes through (d late when it delays them); an
// error when the connection closes first.
func (c *faultConn) pass(l link) error {
	for {
		st, changed := c.n.state(l)
		switch {
		case st.fault == Cut:
			return net.ErrClosed
		case st.fault == Hang:
			select {
			case <-changed:
				continue
			case <-c.closed:
				return net.ErrClosed
			}
		case st.delay > 0:
			t := time.NewTimer(st.delay)
			select {
			case <-t.C:
			case <-c.closed:
				t.Stop()
				return net.ErrClosed
			}
		}
		return nil
	}
}

func (c *faultConn) Write(b []byte) (int, error) {
	if err := c.pass(c.out); err != nil {
		return 0, err
	}
	k, err := c.Conn.Write(b)
	c.sent.feed(b[:k])
	return k, err
}

// Read holds what arrives over a hung link until it is healed.
func (c *faultConn) Read(b []byte) (int, error) {
	k, err := c.Conn.Read(b)
	if k > 0 {
		if perr := c.pass(c.in); perr != nil {
			return 0, perr
		}
		c.received.feed(b[:k])
	}
	return k, err
}

func (c *faultConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.n.mu.Lock()
		delete(c.n.conns, c)
		c.n.mu.Unlock()
	})
	return c.Conn.Close()
}
