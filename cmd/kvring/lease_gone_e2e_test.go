package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// TestThePinsOfACoordinatorThatDiesEnd: a lookup through one node pins the
// chunks on the other nodes that own them, under 5-minute leases only that
// node could release. When it is SIGKILLed, the owners used to keep the pins
// until the leases expired; now each ends them once gossip declares the
// coordinator dead (not on a suspicion), within seconds.
func TestThePinsOfACoordinatorThatDiesEnd(t *testing.T) {
	t.Parallel()
	n1 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0")
	n2 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--join", n1.gossip)
	n3 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--join", n1.gossip)
	for _, n := range []*e2eNode{n1, n2, n3} {
		testutil.Eventually(t, "every node to know the three", 30*time.Second, func() bool {
			l := n.logs()
			return strings.Contains(l, n1.id) && strings.Contains(l, n2.id) && strings.Contains(l, n3.id) &&
				strings.Count(n1.logs(), "ring rebuilt") >= 3
		})
	}
	c, _ := newEngine(t, []string{n1.grpc, n2.grpc, n3.grpc}, 1, 1)
	ctx := context.Background()
	testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	fp, err := c.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids [][]byte
	for i := range 60 {
		ch := e2eChunk(uint64(5000+i), 32<<10)
		if res, err := c.Put(ctx, []client.Chunk{ch}); err != nil || res[0].Status != client.Stored {
			t.Fatalf("put %d: %v %+v", i, err, res)
		}
		ids = append(ids, ch.ID[:])
	}
	cc, err := grpc.NewClient(n1.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := kvringv1.NewCacheClient(cc).Lookup(ctx, &kvringv1.LookupRequest{
		Namespace: &kvringv1.NamespaceRef{Name: "e2e/llama", Fingerprint: fp}, Ids: ids, PinTtlMs: 300_000})
	if err != nil || int(resp.GetHeld()) != len(ids) || resp.GetLeaseId() == 0 {
		t.Fatalf("the pinning lookup through %s: %v %v", n1.id, resp, err)
	}
	pinned := func(n *e2eNode) float64 {
		v, ok := metricValue(t, n, "kvring_store_pinned_chunks")
		if !ok {
			return -1
		}
		return v
	}
	var pinning []*e2eNode
	for _, n := range []*e2eNode{n2, n3} {
		if pinned(n) > 0 {
			pinning = append(pinning, n)
		}
	}
	if len(pinning) == 0 {
		t.Fatalf("the lease pins nothing on the other owners (%v, %v), want some", pinned(n2), pinned(n3))
	}
	n1.kill(t) // its lease records die with it: nobody will release the lease
	for _, n := range pinning {
		testutil.Eventually(t, "the owners to end the dead coordinator's pins", 60*time.Second, func() bool {
			return pinned(n) == 0
		})
		if !strings.Contains(n.logs(), "ended the lookup leases of a coordinator that is gone") {
			t.Errorf("%s ended the pins without its log line", n.id)
		}
	}
}
