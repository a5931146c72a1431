package node

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAStartThatFailsLateUndoesEveryStep: when gossip cannot bind (a later
// step, after the store, the listeners, the services and the metrics are
// up), Start fails naming the cause and undoes everything: the store's data
// directory opens again, the same registerer takes a node's metrics again,
// the node is not ready, and Close is a no-op. A second node on the same
// data directory and registerer then starts and serves.
func TestAStartThatFailsLateUndoesEveryStep(t *testing.T) {
	t.Parallel()
	taken, err := net.ListenPacket("udp", "127.0.0.1:0") // gossip needs this UDP port
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	reg := prometheus.NewRegistry()
	cfg := testNodeConfigWith(t, reg)
	cfg.Membership.GossipAddr = taken.LocalAddr().String()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = n.Start(t.Context())
	if err == nil {
		n.Close(context.Background())
		t.Fatal("Start succeeded with the gossip port taken")
	}
	if !strings.Contains(err.Error(), "cannot start node") || !strings.Contains(err.Error(), "gossip") {
		t.Fatalf("Start: %v, want an error naming gossip", err)
	}
	if n.Ready() || n.Readiness().Ready {
		t.Fatal("a node whose Start failed reports ready")
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatalf("Close after a failed Start: %v", err)
	}

	// Everything the failed Start opened is released.
	again := cfg
	again.Membership.GossipAddr = "127.0.0.1:0"
	n2 := startNode(t, again) // same data directory (bbolt's lock) and registerer (metrics)
	if n2.NodeID() == "" || !n2.Ready() {
		t.Fatalf("the second node did not start: id %q ready %v", n2.NodeID(), n2.Ready())
	}
	conn, err := net.Dial("tcp", n2.GRPCAddr())
	if err != nil {
		t.Fatalf("the second node does not serve gRPC: %v", err)
	}
	conn.Close()
}
