package client

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
)

// topologyCache answers Topology with a one-member ring: the node itself.
type topologyCache struct {
	kvringv1.UnimplementedCacheServer
	addr string
}

func (c topologyCache) Topology(context.Context, *kvringv1.TopologyRequest) (*kvringv1.TopologyResponse, error) {
	cfg := ring.DefaultConfig()
	self := &kvringv1.NodeRef{NodeId: "n1", GrpcAddr: c.addr}
	return &kvringv1.TopologyResponse{Epoch: 1, Self: self, Members: []*kvringv1.NodeRef{self},
		Ring: &kvringv1.RingSettings{PartitionCount: uint32(cfg.PartitionCount), ReplicationFactor: uint32(cfg.ReplicationFactor),
			Load: cfg.Load, VirtualNodes: uint32(cfg.VirtualNodes), Hasher: cfg.Hasher, Fingerprint: cfg.Fingerprint()}}, nil
}

// TestANewClientRoutesAsSoonAsItIsConnected: the first ring view is fetched when the connection comes up, not
// topologyMinGap later (a client created before it connected used to wait that long, and send its first
// 250 ms of calls through the connected node). In a synctest bubble on memNet, so the times are exact.
func TestANewClientRoutesAsSoonAsItIsConnected(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memNet
		const addr = "10.0.0.1:9600"
		gs := grpc.NewServer()
		healthpb.RegisterHealthServer(gs, health.NewServer())
		kvringv1.RegisterCacheServer(gs, topologyCache{addr: addr})
		lis := n.listen(t, addr)
		go gs.Serve(lis)
		t.Cleanup(gs.Stop)

		c, err := New(Config{Conn: ConnConfig{Seeds: []string{addr}, DialOptions: []grpc.DialOption{n.dialOption()}},
			Namespace: "ns", Schema: Schema{Model: "m", TokensPerChunk: 16}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		connected := within(t, 5*time.Second, "connected", func() bool { return c.State().Status == ConnConnected })
		routed := within(t, 5*time.Second, "routing", func() bool { return len(c.Routing().Members) == 1 })
		if routed >= topologyMinGap/5 {
			t.Fatalf("the ring view came %s after the connection (connected after %s), want at once", routed, connected)
		}
	})
}
