package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/testutil"
)

// socketNode starts a node with a local socket, connects a client to it and
// registers namespace name (the node's defaults) through it.
func socketNode(t *testing.T, name string) (*Node, *local.Client, local.Namespace) {
	t.Helper()
	cfg := testNodeConfig(t)
	cfg.Socket.Path = filepath.Join(testutil.SocketDir(t), "kvring.sock")
	n := startNode(t, cfg)
	c, err := local.Dial(t.Context(), local.Config{Path: cfg.Socket.Path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ns, err := c.RegisterNamespace(name, local.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n, c, ns
}

// TestSocketPublishMakesTheBlobTheChunk: a blob published to this node as
// owner becomes the chunk without a copy: the node's used bytes grew with
// the blob and stay as they are at the publish (the bytes move from blob to
// chunk accounting), and a get hands out the very memory the engine wrote
// (the same place of the same mapping). A publish that deletes its blob
// leaves the chunk readable and the blob gone.
func TestSocketPublishMakesTheBlobTheChunk(t *testing.T) {
	t.Parallel()
	n, c, ns := socketNode(t, "zero-copy")
	const size = 1 << 20
	before := n.Store().Stats()
	b, err := c.CreateBlob(size)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b.Data {
		b.Data[i] = byte(i*13 + 1)
	}
	if err := c.Seal(b.ID); err != nil {
		t.Fatal(err)
	}
	sealed := n.Store().Stats()
	if sealed.UsedBytes < before.UsedBytes+size || sealed.BlobBytes != before.BlobBytes+size {
		t.Fatalf("stats %+v after a sealed blob of %d bytes, before %+v", sealed, size, before)
	}
	id := sha256.Sum256([]byte("zero-copy 0"))
	res, err := c.Publish(ns, [][32]byte{id}, []uint64{b.ID}, nil)
	if err != nil || len(res) != 1 || res[0].Status != "stored" {
		t.Fatalf("publish: %+v %v", res, err)
	}
	published := n.Store().Stats()
	if published.UsedBytes != sealed.UsedBytes || published.BlobBytes != sealed.BlobBytes-size ||
		published.PayloadBytes != sealed.PayloadBytes+size || published.Chunks != sealed.Chunks+1 {
		t.Fatalf("stats %+v after publishing, %+v before: the blob's bytes must become the chunk's", published, sealed)
	}
	got, err := c.GetChunks(ns, [][32]byte{id}, nil)
	if err != nil || !got[0].Found {
		t.Fatalf("get: %+v %v", got, err)
	}
	if &got[0].Blob.Data[0] != &b.Data[0] || !bytes.Equal(got[0].Blob.Data, b.Data) {
		t.Fatal("the chunk handed out is not the memory the engine wrote")
	}
	if err := c.Release(got[0].BlobID); err != nil {
		t.Fatal(err)
	}

	b2, err := c.CreateBlob(size)
	if err != nil {
		t.Fatal(err)
	}
	copy(b2.Data, bytes.Repeat([]byte("kvring"), size/6+1))
	want := bytes.Clone(b2.Data)
	if err := c.Seal(b2.ID); err != nil {
		t.Fatal(err)
	}
	id2 := sha256.Sum256([]byte("zero-copy 1"))
	res, err = c.PublishAndDelete(ns, [][32]byte{id2}, []uint64{b2.ID}, nil)
	if err != nil || res[0].Status != "stored" {
		t.Fatalf("publish and delete: %+v %v", res, err)
	}
	if bs, err := c.GetBlobs([]uint64{b2.ID}, false); err != nil || len(bs) != 0 {
		t.Fatalf("the consumed blob is still there: %+v %v", bs, err)
	}
	got, err = c.GetChunks(ns, [][32]byte{id2}, nil)
	if err != nil || !got[0].Found || !bytes.Equal(got[0].Blob.Data, want) {
		t.Fatalf("the consumed blob's chunk: %+v %v", got, err)
	}
	if err := c.Release(got[0].BlobID); err != nil {
		t.Fatal(err)
	}
	if st := n.Store().Stats(); st.BlobBytes != before.BlobBytes {
		t.Fatalf("blob bytes %d after the blobs became chunks", st.BlobBytes)
	}
}

// TestSocketClientFailsFastAndRedialsAfterARestart: once the node is gone
// the client's next call fails at once; once a node serves the socket
// again, the same client's next call succeeds on a new connection.
func TestSocketClientFailsFastAndRedialsAfterARestart(t *testing.T) {
	t.Parallel()
	cfg := testNodeConfig(t)
	cfg.Socket.Path = filepath.Join(testutil.SocketDir(t), "kvring.sock")
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, err := local.Dial(t.Context(), local.Config{Path: cfg.Socket.Path, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.InstanceStatus(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		start := time.Now()
		if _, err := c.InstanceStatus(); err == nil {
			t.Fatal("a call to a stopped node succeeded")
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a call to a stopped node took %v", d)
		}
	}
	cfg2 := testNodeConfig(t)
	cfg2.Socket.Path = cfg.Socket.Path
	startNode(t, cfg2)
	st, err := c.InstanceStatus()
	if err != nil {
		t.Fatalf("the same client after the node's restart: %v", err)
	}
	if st.IPCConnections != 1 {
		t.Fatalf("instance status after the redial: %+v", st)
	}
}

// TestSocketPublishKeepsPlacementKeys: in a namespace placed by groups, a
// chunk published through the socket (its blob's slot becoming the chunk)
// keeps its group key, as a gRPC put's chunk does: the hand-off finds its
// owners by it.
func TestSocketPublishKeepsPlacementKeys(t *testing.T) {
	t.Parallel()
	for _, useJSON := range []bool{false, true} {
		t.Run(map[bool]string{false: "binary", true: "JSON"}[useJSON], func(t *testing.T) {
			t.Parallel()
			testPublishKeepsPlacementKeys(t, useJSON)
		})
	}
}

func testPublishKeepsPlacementKeys(t *testing.T, useJSON bool) {
	cfg := testNodeConfig(t)
	cfg.Socket.Path = filepath.Join(testutil.SocketDir(t), "kvring.sock")
	n := startNode(t, cfg)
	c, err := local.Dial(t.Context(), local.Config{Path: cfg.Socket.Path, JSON: useJSON})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns, err := c.RegisterNamespace("grouped", local.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16, ChunksPerGroup: 2}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := [][32]byte{sha256.Sum256([]byte("g0")), sha256.Sum256([]byte("g1"))}
	groups := [][32]byte{ids[0], ids[0]}
	var blobs []uint64
	for range ids {
		b, err := c.CreateBlob(4096)
		if err != nil {
			t.Fatal(err)
		}
		b.Data[0] = byte(len(blobs))
		blobs = append(blobs, b.ID)
	}
	res, err := c.SealPublishAndDelete(ns, ids, blobs, groups)
	if err != nil || res[0].Status != "stored" || res[1].Status != "stored" {
		t.Fatalf("publish: %+v %v", res, err)
	}
	keyed := 0
	for _, h := range n.Store().Held() {
		if h.ID == ids[0] || h.ID == ids[1] {
			if !h.Keyed || h.Place != ids[0] {
				t.Fatalf("chunk %x placed by %x (keyed %v), want its group key %x", h.ID[:4], h.Place[:4], h.Keyed, ids[0][:4])
			}
			keyed++
		}
	}
	if keyed != 2 {
		t.Fatalf("%d of the 2 published chunks listed", keyed)
	}
	missing := sha256.Sum256([]byte("g2"))
	lr, err := c.Lookup(ns, append(ids, missing), [][32]byte{ids[0], ids[0], missing}, 0)
	if err != nil || lr.Held != 2 {
		t.Fatalf("grouped lookup: %+v %v; want 2 held", lr, err)
	}
}
