package node

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/store"
)

// BenchmarkOneNodePutLookup measures the per-call cost of the calls an
// engine makes most, on one node through the Go SDK over loopback: each
// operation is a Lookup of 8 held ids and an eager Put of 8 new 32 KiB
// chunks (256 KiB). The node and the SDK share the process, so allocs/op
// counts both sides: a figure that the shared machine's noise does not
// move, unlike ns/op.
//
//	go test -run '^$' -bench OneNodePutLookup -benchtime 2000x -count 5 ./node/
func BenchmarkOneNodePutLookup(b *testing.B) {
	n, _ := startBenchNode(b, 1<<30, func(c *Config) { c.Socket.Path = "" })
	sdk := benchSDK(b, n)

	const perCall, size = 8, 32 << 10
	chunks := make([]client.Chunk, perCall)
	ids := make([]client.ChunkID, perCall)
	data := make([]byte, perCall*size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	next := uint64(0)
	fill := func() { // new ids, and new bytes under them: each put stores perCall chunks
		for i := range chunks {
			next++
			binary.LittleEndian.PutUint64(chunks[i].ID[:], next)
			binary.LittleEndian.PutUint64(data[i*size:], next)
			chunks[i].Data = data[i*size : (i+1)*size]
		}
	}
	ctx := context.Background()
	put := func() {
		res, err := sdk.Put(ctx, chunks)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Status != client.Stored {
				b.Fatalf("put: chunk %s: %s (%s)", r.ID, r.Status, r.Reason)
			}
		}
	}
	fill()
	put() // registers the namespace
	b.SetBytes(perCall * size)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i := range chunks {
			ids[i] = chunks[i].ID
		}
		res, err := sdk.Lookup(ctx, ids, 0)
		if err != nil {
			b.Fatal(err)
		}
		if res.Held != perCall {
			b.Fatalf("lookup: %d of %d held", res.Held, perCall)
		}
		fill()
		put()
	}
}

// benchNode starts one node in process (its segments in /dev/shm when it
// can) and an SDK connected to it over loopback.
func benchNode(b *testing.B) *client.Client {
	shm := testutil.ShmDir(b, "bench-")
	cfg := DefaultConfig()
	cfg.GRPCAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Membership = membership.LocalConfig("")
	cfg.Store = store.Config{DataDir: b.TempDir(), ShmDir: shm, MemoryLimit: 1 << 30}
	cfg.Logger = quietLogger()
	cfg.Membership.Logger = cfg.Logger
	n, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close(context.Background()) })
	sdk, err := client.New(client.Config{Conn: client.ConnConfig{Seeds: []string{n.GRPCAddr()}}, Namespace: "bench/model",
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sdk.Close() })
	testutil.Eventually(b, "the SDK to connect", 10*time.Second, func() bool { return sdk.State().Status == client.ConnConnected })
	return sdk
}

// heldChunks puts n chunks of size bytes (ids 1..n) and returns their ids.
func heldChunks(b *testing.B, sdk *client.Client, n, size int) []client.ChunkID {
	chunks := make([]client.Chunk, n)
	ids := make([]client.ChunkID, n)
	for i := range chunks {
		binary.LittleEndian.PutUint64(chunks[i].ID[:], uint64(i+1))
		chunks[i].Data = make([]byte, size)
		binary.LittleEndian.PutUint64(chunks[i].Data, uint64(i+1))
		ids[i] = chunks[i].ID
	}
	if _, err := sdk.Put(context.Background(), chunks); err != nil {
		b.Fatal(err)
	}
	return ids
}

// BenchmarkOneNodeLookup is the Lookup half of BenchmarkOneNodePutLookup
// alone: one node in process, the SDK over loopback, each operation a Lookup
// of 8 held 32 KiB chunks. allocs/op counts the SDK's and the node's
// allocations together.
//
//	go test -run '^$' -bench OneNodeLookup -benchtime 5000x -count 5 ./node/
func BenchmarkOneNodeLookup(b *testing.B) {
	sdk := benchNode(b)
	const perCall = 8
	ids := heldChunks(b, sdk, perCall, 32<<10)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := sdk.Lookup(ctx, ids, 0)
		if err != nil {
			b.Fatal(err)
		}
		if res.Held != perCall {
			b.Fatalf("lookup: %d of %d held", res.Held, perCall)
		}
	}
}

// BenchmarkOneNodeGet is a Get of 32 held 32 KiB chunks (1 MiB) a call, on
// one node through the SDK over loopback: the read side of the trace
// replay's per-call cost.
//
//	go test -run '^$' -bench OneNodeGet -benchtime 2000x -count 5 ./node/
func BenchmarkOneNodeGet(b *testing.B) {
	sdk := benchNode(b)
	const perCall, size = 32, 32 << 10
	ids := heldChunks(b, sdk, perCall, size)
	ctx := context.Background()
	b.SetBytes(perCall * size)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := sdk.Get(ctx, ids)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if !r.Found || len(r.Data) != size {
				b.Fatalf("get %s: found %v, %d bytes (%s)", r.ID, r.Found, len(r.Data), r.Reason)
			}
		}
	}
}

// BenchmarkOneNodeGetOne is a Get of one held chunk a call (256 KiB and
// 2 MiB), on one node through the SDK over loopback: the per-call cost of
// loadtest/olricbench's gets without the cluster around them. allocs/op
// counts the SDK's and the node's allocations together.
//
//	go test -run '^$' -bench OneNodeGetOne -benchtime 2000x ./node/
func BenchmarkOneNodeGetOne(b *testing.B) {
	sdk := benchNode(b)
	for _, size := range []int{256 << 10, 2 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			ctx := context.Background()
			chunks := make([]client.Chunk, 8)
			ids := make([]client.ChunkID, len(chunks))
			for i := range chunks {
				binary.LittleEndian.PutUint64(chunks[i].ID[:], uint64(size+i))
				chunks[i].Data = make([]byte, size)
				binary.LittleEndian.PutUint64(chunks[i].Data, uint64(i+1))
				ids[i] = chunks[i].ID
				if _, err := sdk.Put(ctx, chunks[i:i+1]); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				res, err := sdk.Get(ctx, ids[i%len(ids):i%len(ids)+1])
				if err != nil {
					b.Fatal(err)
				}
				if r := res[0]; !r.Found || len(r.Data) != size {
					b.Fatalf("get %s: found %v, %d bytes (%s)", r.ID, r.Found, len(r.Data), r.Reason)
				}
				i++
			}
		})
	}
}

// benchSDK connects an SDK to n in namespace bench/model; it ends with the
// benchmark.
func benchSDK(b *testing.B, n *Node) *client.Client {
	sdk, err := client.New(client.Config{Conn: client.ConnConfig{Seeds: []string{n.GRPCAddr()}}, Namespace: "bench/model",
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sdk.Close() })
	testutil.Eventually(b, "the SDK to connect", 10*time.Second, func() bool { return sdk.State().Status == client.ConnConnected })
	return sdk
}
