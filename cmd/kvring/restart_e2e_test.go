package main

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
)

// Stopped nodes keep their ports. A node's ports are picked by the kernel
// when it first starts; once it stops they are free, and the kernel may hand
// them to a node or a connection of another test running in parallel. Two
// things would then break: a restart on the same addresses (the client's
// seed, the cluster's gossip peer) would find its port taken, and a call that
// must be refused by the stopped node would reach someone else. So a node
// that is killed or stopped holds its ports (testutil.HoldPort: bound, not
// listening, so calls are refused and the kernel gives the ports to nobody
// else) until restartNode starts it there again or the test ends.

// portHolds are the sockets keeping a stopped node's ports.
type portHolds struct {
	mu  sync.Mutex
	tcp []io.Closer // gRPC, admin, gossip: may stay while the node listens again
	udp []io.Closer // gossip: must go before the node binds it again
}

func closeAll(cs []io.Closer) {
	for _, c := range cs {
		c.Close()
	}
}

func (h *portHolds) releaseUDP() {
	h.mu.Lock()
	defer h.mu.Unlock()
	closeAll(h.udp)
	h.udp = nil
}

func (h *portHolds) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	closeAll(h.tcp)
	closeAll(h.udp)
	h.tcp, h.udp = nil, nil
}

// holdPorts holds the TCP ports (gRPC, admin, gossip) and the UDP gossip port
// of n, which has exited, until restartNode or the end of the test. Best
// effort: a port another process took in the instant after the exit is
// logged, and a restart on it is retried (restartNode).
func (n *e2eNode) holdPorts(t *testing.T) {
	t.Helper()
	n.held.mu.Lock()
	defer n.held.mu.Unlock()
	for _, addr := range []string{n.grpc, n.admin, n.gossip} {
		h, err := testutil.HoldPort(addr)
		if err != nil {
			t.Logf("node %s stopped, but its port is taken already: %v", n.id, err)
			continue
		}
		n.held.tcp = append(n.held.tcp, h)
	}
	if pc, err := net.ListenPacket("udp", n.gossip); err != nil {
		t.Logf("node %s stopped, but its UDP gossip port is taken already: %v", n.id, err)
	} else {
		n.held.udp = append(n.held.udp, pc)
	}
	t.Cleanup(n.held.release)
}

// restartNode starts the stopped node n again on its data directory and its
// gRPC and gossip addresses (the admin port is new) and waits until it is
// ready. The TCP ports stay held while it starts; the UDP gossip port is
// released just before. A start that still fails with "address already in
// use" (a process took a port in between) is tried again, within a deadline.
func restartNode(t *testing.T, n *e2eNode, extra ...string) *e2eNode {
	t.Helper()
	return restartNodeBin(t, n, kvringBinary(t), extra...)
}

// restartNodeBin is restartNode with another kvring binary: a rolling
// upgrade's (or downgrade's) step.
func restartNodeBin(t *testing.T, n *e2eNode, bin string, extra ...string) *e2eNode {
	t.Helper()
	defer n.held.release()
	n.held.releaseUDP()
	var again *e2eNode
	testutil.Eventually(t, "node "+n.id+" to start again on "+n.grpc+" and "+n.gossip, 60*time.Second, func() bool {
		p := startKvringBin(t, bin, nil, serveArgs(n.data, n.shm, n.grpc, n.gossip, extra...)...)
		m, exited := p.awaitLog(readyRe, 60*time.Second)
		switch {
		case m != nil:
			again = &e2eNode{proc: p, id: m[1], grpc: m[2], admin: m[3], gossip: m[4], data: n.data, shm: n.shm}
			return true
		case exited && strings.Contains(p.logs(), "address already in use"):
			t.Logf("restart of node %s found a port taken; trying again: %s", n.id, lineContaining(p.logs(), "address already in use"))
			return false
		case exited:
			t.Fatalf("kvring exited before it was ready again:\n%s", p.logs())
		default:
			t.Fatalf("kvring was not ready again within 60s:\n%s", p.logs())
		}
		return false
	})
	return again
}

// lineContaining returns the first line of s that contains sub, or "".
func lineContaining(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
