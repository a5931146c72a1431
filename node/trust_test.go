package node

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// TestAForgedNamespaceRecordDoesNotLockOutTheRealClient: a Peer.PutNamespace
// with a record no registration could make (created at 0, so it would win
// the earliest-created rule forever) is refused, and the engine that
// registers the name afterwards is served, not told "cluster has evil".
func TestAForgedNamespaceRecordDoesNotLockOutTheRealClient(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 1, 8<<20)
	cc, err := grpc.NewClient(tc.nodes[0].addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	evil := &kvringv1.NamespaceSchema{Model: "evil", Dtype: "bf16", TokensPerChunk: 16}
	_, err = kvringv1.NewPeerClient(cc).PutNamespace(context.Background(), &kvringv1.PutNamespaceRequest{
		Namespace: &kvringv1.NamespaceRecord{Name: "test/model", Schema: evil, Fingerprint: namespace.Fingerprint(evil),
			ReplicationFactor: 1, MinReplicas: 1, CreatedUnixMs: 0}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("forged PutNamespace: %v, want InvalidArgument", err)
	}
	c := testClient(t, tc.nodes[0].addr, 1, 1)
	res, err := c.Put(context.Background(), []client.Chunk{chunkOf(1, 100)})
	if err != nil || res[0].Status != client.Stored {
		t.Fatalf("the real client after the forgery: %v %+v", err, res)
	}
}

// TestAPutTeachesAnOwnerThatMissedTheRegistration: an owner that does not
// know a namespace (it missed the broadcast) refuses to stage into it; the
// coordinator offers it the record and the put is stored there.
func TestAPutTeachesAnOwnerThatMissedTheRegistration(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 2, 8<<20)
	c := testClientWith(t, client.Config{
		Conn: client.ConnConfig{Seeds: []string{tc.nodes[0].addr}}, Namespace: "test/model",
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, DisableRouting: true, Logger: quietLogger(),
	})
	if _, err := c.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tc.nodes[1].svc.Registry.Delete("test/model") == nil {
		t.Fatal("node 1 never learned the namespace")
	}
	var ch client.Chunk // owned by node 1
	for n := uint64(1); ; n++ {
		ch = chunkOf(n, 1000)
		if p, _ := tc.Ring().Primary("test/model", ch.ID[:]); p.ID == tc.nodes[1].id {
			break
		}
	}
	res, err := c.Put(context.Background(), []client.Chunk{ch})
	if err != nil || res[0].Status != client.Stored || res[0].Holders[0].ID != tc.nodes[1].id {
		t.Fatalf("put to an owner that missed the registration: %v %+v", err, res)
	}
	if tc.nodes[1].svc.Registry.Get("test/model") == nil {
		t.Fatal("node 1 was not taught the namespace")
	}
}
