package node

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/store"
)

// startBenchNode starts a single node with a local socket and a store of
// limit bytes in a fresh /dev/shm directory, for the benchmarks.
func startBenchNode(b *testing.B, limit int64, mod ...func(*Config)) (*Node, Config) {
	shm := testutil.ShmDir(b, "bench-")
	cfg := DefaultConfig()
	cfg.GRPCAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Membership = membership.LocalConfig("")
	cfg.Store = store.Config{DataDir: b.TempDir(), ShmDir: shm, MemoryLimit: limit}
	cfg.Logger = quietLogger()
	cfg.Membership.Logger = cfg.Logger
	cfg.Socket.Path = filepath.Join(testutil.SocketDir(b), "kvring.sock")
	for _, m := range mod {
		m(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close(context.Background()) })
	return n, cfg
}

// BenchmarkSocketRoundTrip is one request and its reply on the local socket
// (instance_status_request), the fixed cost of every socket call.
//
//	go test -run '^$' -bench SocketRoundTrip ./node/
func BenchmarkSocketRoundTrip(b *testing.B) {
	_, cfg := startBenchNode(b, 64<<20)
	sock, err := local.Dial(b.Context(), local.Config{Path: cfg.Socket.Path})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sock.Close() })
	b.ResetTimer()
	for b.Loop() {
		if _, err := sock.InstanceStatus(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSocketGetHeld reads chunks this node holds through the local
// socket: kvring_get of a batch (the chunks are handed out in place), every
// byte read through the client's mapping (reused: the segments are mapped
// once per connection), then one kvring_release_request for the batch. It
// reports the effective read rate, GB/s of chunk bytes read per second of
// the whole loop.
//
//	go test -run '^$' -bench SocketGetHeld ./node/
func BenchmarkSocketGetHeld(b *testing.B) {
	for _, size := range []int{2 << 20, 256 << 10} {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("size=%dKiB/batch=%d", size>>10, batch), func(b *testing.B) { benchSocketGet(b, size, batch) })
		}
	}
}

func benchSocketGet(b *testing.B, size, batch int) {
	_, cfg := startBenchNode(b, 128<<20)
	sock, err := local.Dial(b.Context(), local.Config{Path: cfg.Socket.Path})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sock.Close() })
	ns, err := sock.RegisterNamespace("bench/get", local.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([][32]byte, batch)
	for i := range ids {
		ids[i] = sha256.Sum256(fmt.Appendf(nil, "get %d", i))
		publishFilled(b, sock, ns, ids[i], size, i)
	}
	var sink uint64
	b.SetBytes(int64(size * batch))
	b.ResetTimer()
	for b.Loop() {
		got, err := sock.GetChunks(ns, ids, nil)
		if err != nil {
			b.Fatal(err)
		}
		release := make([]uint64, 0, len(got))
		for _, r := range got {
			if !r.Found {
				b.Fatalf("get: %+v", r)
			}
			sink += testutil.SumWords(r.Blob.Data)
			release = append(release, r.BlobID)
		}
		if n, err := sock.ReleaseAll(release); err != nil || n != len(release) {
			b.Fatalf("release: %d of %d, %v", n, len(release), err)
		}
	}
	if sink == 1 {
		b.Log(sink)
	}
}
