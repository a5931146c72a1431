package loadtest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/store"
)

// TestKvringReadBuffersAreReusedAndVerified: with ReadBufferBytes the
// backend reads every chunk into the same buffers call after call (no
// allocation per chunk), the bytes are the chunks' own, and a chunk longer
// than the buffers is a miss, not a truncated read.
func TestKvringReadBuffersAreReusedAndVerified(t *testing.T) {
	addr := inProcessNode(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const size = 4096
	k, err := NewKvring(KvringConfig{Seeds: []string{addr}, Namespace: "lt/bufs", Logger: quiet,
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, ReadBufferBytes: size})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool {
		return k.Client().State().Status == client.ConnConnected
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ids := BlockChunkIDs(7, 5)
	chunks := make([]Chunk, len(ids))
	for i, id := range ids {
		n := size
		if i == 4 {
			n = size + 1 // longer than the buffers
		}
		chunks[i] = Chunk{ID: id, Data: ChunkBytes(id, n)}
	}
	if res, err := k.Put(ctx, chunks); err != nil || len(res) != len(ids) {
		t.Fatalf("put: %v, %v", res, err)
	}
	first, err := k.Get(ctx, ids[:4], ids[:4])
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range first {
		if !g.Found || !VerifyChunk(ids[i], g.Data) || len(g.Data) != size {
			t.Fatalf("chunk %d: found %v, %d bytes, verified %v", i, g.Found, len(g.Data), VerifyChunk(ids[i], g.Data))
		}
	}
	again, err := k.Get(ctx, ids[:4], ids[:4])
	if err != nil {
		t.Fatal(err)
	}
	for i := range again {
		if !again[i].Found || &again[i].Data[0] != &first[i].Data[0] {
			t.Fatalf("chunk %d read again into another buffer (found %v): the buffers are not reused", i, again[i].Found)
		}
	}
	long, err := k.Get(ctx, ids[4:], ids[4:])
	if err != nil {
		t.Fatal(err)
	}
	if long[0].Found {
		t.Fatalf("a chunk longer than the read buffers was found with %d bytes", len(long[0].Data))
	}
}

// inProcessNode starts one kvring node in this process (segments in
// /dev/shm when it can) and returns its gRPC address.
func inProcessNode(t *testing.T) string {
	shm := testutil.ShmDir(t, "loadtest-")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := node.DefaultConfig()
	cfg.GRPCAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Membership = membership.LocalConfig("")
	cfg.Membership.Logger = quiet
	cfg.Store = store.Config{DataDir: t.TempDir(), ShmDir: shm, MemoryLimit: 64 << 20}
	cfg.Logger = quiet
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	testutil.Eventually(t, "the node to be ready", 10*time.Second, n.Ready)
	return n.GRPCAddr()
}
