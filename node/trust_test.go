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
