package node

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/store"
)

// BenchmarkSocketPutVsGRPC puts chunks into one node two ways in the same
// run, alternating: through the local socket (create a blob, write the
// chunk into the mapping, then seal it, publish it to the node as owner and
// delete it in one request: two requests, the blob's slot becomes the
// chunk) and through the gRPC SDK (client.Put to the same node). The
// node's budget (128 MiB) is cycled through both paths before the timer
// starts. It reports each path's MB/s and socket/grpc, the speed-up.
//
//	go test -run '^$' -bench SocketPutVsGRPC -benchtime 200x ./node/
func BenchmarkSocketPutVsGRPC(b *testing.B) {
	for _, size := range []int{2 << 20, 256 << 10} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) { benchSocketPut(b, size) })
	}
}

// startBenchNode starts a single node with a local socket and a store of
// limit bytes in a fresh /dev/shm directory, for the benchmarks.
func startBenchNode(b *testing.B, limit int64) (*Node, Config) {
	shm, err := os.MkdirTemp("/dev/shm", "kvring-node-bench-")
	if err != nil {
		shm = b.TempDir()
	}
	b.Cleanup(func() { os.RemoveAll(shm) })
	cfg := DefaultConfig()
	cfg.GRPCAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Membership = membership.LocalConfig("")
	cfg.Store = store.Config{DataDir: b.TempDir(), ShmDir: shm, MemoryLimit: limit}
	cfg.Logger = quietLogger()
	cfg.Membership.Logger = cfg.Logger
	cfg.Socket.Path = filepath.Join(b.TempDir(), "kvring.sock")
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

func benchSocketPut(b *testing.B, size int) {
	n, cfg := startBenchNode(b, 128<<20)

	schema := client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}
	sdk, err := client.New(client.Config{Conn: client.ConnConfig{Seeds: []string{n.GRPCAddr()}}, Namespace: "bench/model",
		Schema: schema, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sdk.Close() })
	testutil.Eventually(b, "the SDK to connect", 10*time.Second, func() bool { return sdk.State().Status == client.ConnConnected })
	sock, err := local.Dial(b.Context(), local.Config{Path: cfg.Socket.Path})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sock.Close() })
	ns, err := sock.RegisterNamespace("bench/model", local.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i*131 + 17)
	}
	idOf := func(path byte, i int) [32]byte {
		var k [9]byte
		k[0] = path
		binary.LittleEndian.PutUint64(k[1:], uint64(i))
		return sha256.Sum256(k[:])
	}
	var steps [3]time.Duration // create, copy, seal+publish
	sockPut := func(i int) {
		binary.LittleEndian.PutUint64(src, uint64(i)) // distinct bytes per chunk
		t0 := time.Now()
		blob, err := sock.CreateBlob(int64(size))
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		copy(blob.Data, src)
		t2 := time.Now()
		res, err := sock.SealPublishAndDelete(ns, [][32]byte{idOf('s', i)}, []uint64{blob.ID}, nil)
		if err != nil || res[0].Status != "stored" {
			b.Fatalf("socket publish: %+v %v", res, err)
		}
		for k, d := range []time.Duration{t1.Sub(t0), t2.Sub(t1), time.Since(t2)} {
			steps[k] += d
		}
	}
	grpcPut := func(i int) {
		binary.LittleEndian.PutUint64(src, uint64(i))
		out, err := sdk.Put(b.Context(), []client.Chunk{{ID: client.ChunkID(idOf('g', i)), Data: src}})
		if err != nil || out[0].Status != client.Stored {
			b.Fatalf("gRPC put: %+v %v", out, err)
		}
	}
	// Warm up: cycle the node's whole budget through both paths once, so
	// the measured puts reuse slots whose pages exist (a node that has run
	// for a while) instead of paying for fresh pages, which neither path
	// does in a steady state.
	for i := range int(cfg.Store.MemoryLimit) / size {
		sockPut(-1 - i)
		grpcPut(-1 - i)
	}
	var sockTime, grpcTime time.Duration
	steps = [3]time.Duration{}
	b.SetBytes(int64(2 * size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sockPut(i)
		t1 := time.Now()
		grpcPut(i)
		t2 := time.Now()
		sockTime += t1.Sub(t0)
		grpcTime += t2.Sub(t1)
	}
	b.StopTimer()
	per := func(d time.Duration) time.Duration { return (d / time.Duration(b.N)).Round(time.Microsecond) }
	b.Logf("socket put, mean per chunk: create %v, copy %v, seal+publish %v", per(steps[0]), per(steps[1]), per(steps[2]))
	b.Logf("segments mapped by the socket client: %d; store segments: %d", sock.Segments(), n.Store().Stats().Segments)
	mb := float64(size) * float64(b.N) / 1e6
	b.ReportMetric(mb/sockTime.Seconds(), "socket-MB/s")
	b.ReportMetric(mb/grpcTime.Seconds(), "grpc-MB/s")
	b.ReportMetric(grpcTime.Seconds()/sockTime.Seconds(), "socket/grpc")
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
		blob, err := sock.CreateBlob(int64(size))
		if err != nil {
			b.Fatal(err)
		}
		for k := range blob.Data {
			blob.Data[k] = byte(k*7 + i)
		}
		if err := sock.Seal(blob.ID); err != nil {
			b.Fatal(err)
		}
		res, err := sock.PublishAndDelete(ns, ids[i:i+1], []uint64{blob.ID}, nil)
		if err != nil || res[0].Status != "stored" {
			b.Fatalf("publish: %+v %v", res, err)
		}
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
			sink += sumWords(r.Blob.Data)
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

// sumWords reads every byte of p (a multiple of 32 bytes long) as 64-bit
// words, four at a time.
func sumWords(p []byte) uint64 {
	var a, c, d, e uint64
	for len(p) >= 32 {
		a += binary.LittleEndian.Uint64(p)
		c += binary.LittleEndian.Uint64(p[8:])
		d += binary.LittleEndian.Uint64(p[16:])
		e += binary.LittleEndian.Uint64(p[24:])
		p = p[32:]
	}
	return a + c + d + e
}
