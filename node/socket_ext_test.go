package node

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/testutil"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// TestSocketPublishLookupGet: a blob written and sealed through the socket
// is published as a cluster chunk through the node's two-phase write
// (stored, this node the holder, used bytes grown by the chunk), a second
// publish is already_held, a lookup counts it (and pins it under a lease),
// and a get hands it back byte-exact through the client's mapping. A
// publish to a namespace nobody registered fails with the reason.
func TestSocketPublishLookupGet(t *testing.T) {
	t.Parallel()
	n, c, ns := socketNode(t, "socket-test")
	b, err := c.CreateBlob(300 << 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b.Data {
		b.Data[i] = byte(i*31 + 7)
	}
	want := append([]byte(nil), b.Data...)
	if err := c.Seal(b.ID); err != nil {
		t.Fatal(err)
	}
	id := sha256.Sum256([]byte("chunk 0"))
	chunksBefore := n.Store().Stats().Chunks
	res, err := c.Publish(ns, [][32]byte{id}, []uint64{b.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Status != "stored" || len(res[0].Holders) != 1 || res[0].Holders[0].NodeID != n.NodeID() {
		t.Fatalf("publish: %+v", res)
	}
	if st := n.Store().Stats(); st.Chunks != chunksBefore+1 {
		t.Fatalf("chunks %d after publish, want %d", st.Chunks, chunksBefore+1)
	}
	res, err = c.Publish(ns, [][32]byte{id}, []uint64{b.ID}, nil)
	if err != nil || res[0].Status != "already_held" {
		t.Fatalf("second publish: %+v %v", res, err)
	}
	missing := sha256.Sum256([]byte("chunk 1"))
	lr, err := c.Lookup(ns, [][32]byte{id, missing}, nil, 10000)
	if err != nil || lr.Held != 1 || lr.LeaseID == 0 {
		t.Fatalf("lookup: %+v %v", lr, err)
	}
	if ok, err := c.ReleaseLease(lr.LeaseID); err != nil || !ok {
		t.Fatalf("release lease: %v %v", ok, err)
	}
	got, err := c.GetChunks(ns, [][32]byte{id, missing}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].Found || got[0].Blob == nil || !bytes.Equal(got[0].Blob.Data, want) || got[1].Found || got[1].Reason == "" {
		t.Fatalf("get chunks: %+v", got)
	}
	if err := c.Release(got[0].BlobID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Publish(local.Namespace{Name: "nobody", Fingerprint: ns.Fingerprint}, [][32]byte{id}, []uint64{b.ID}, nil)
	if err == nil {
		t.Fatal("publish to an unregistered namespace succeeded")
	}
}

// TestSocketWorksWhenTheNodeRequiresTokens: with bearer tokens and a
// cluster key configured, engines on the local socket (admitted by the
// socket file's mode) still publish, while a gRPC call without a token is
// refused.
func TestSocketWorksWhenTheNodeRequiresTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	key := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(tokens, []byte("engine-token-0123456789 *\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("a cluster secret of enough bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testNodeConfig(t)
	cfg.Socket.Path = filepath.Join(testutil.SocketDir(t), "kvring.sock")
	cfg.Security.AuthTokensFile, cfg.Security.ClusterKeyFile = tokens, key
	n := startNode(t, cfg)
	c, err := local.Dial(t.Context(), local.Config{Path: cfg.Socket.Path})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns, err := c.RegisterNamespace("socket-auth", local.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, 0, 0)
	if err != nil {
		t.Fatalf("register through the socket: %v", err)
	}
	b, err := c.CreateBlob(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Seal(b.ID); err != nil {
		t.Fatal(err)
	}
	res, err := c.Publish(ns, [][32]byte{sha256.Sum256([]byte("x"))}, []uint64{b.ID}, nil)
	if err != nil || len(res) != 1 || res[0].Status != "stored" {
		t.Fatalf("publish through the socket of a node requiring tokens: %+v %v", res, err)
	}
	cc, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = kvringv1.NewCacheClient(cc).Lookup(t.Context(), &kvringv1.LookupRequest{
		Namespace: &kvringv1.NamespaceRef{Name: "socket-auth", Fingerprint: ns.Fingerprint}, Ids: [][]byte{make([]byte, 32)}})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a gRPC lookup without a token: %v, want Unauthenticated", err)
	}
}
