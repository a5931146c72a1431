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
// chunk into the mapping, seal, publish to the node as owner deleting the
// blob in the same request: three requests, the blob's slot becomes the
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

func benchSocketPut(b *testing.B, size int) {
	shm, err := os.MkdirTemp("/dev/shm", "kvring-node-bench-")
	if err != nil {
		shm = b.TempDir()
	}
	b.Cleanup(func() { os.RemoveAll(shm) })
	cfg := DefaultConfig()
	cfg.GRPCAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Membership = membership.LocalConfig("")
	cfg.Store = store.Config{DataDir: b.TempDir(), ShmDir: shm, MemoryLimit: 128 << 20}
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
	var steps [4]time.Duration // create, copy, seal, publish
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
		if err := sock.Seal(blob.ID); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		res, err := sock.PublishAndDelete(ns, [][32]byte{idOf('s', i)}, []uint64{blob.ID}, nil)
		if err != nil || res[0].Status != "stored" {
			b.Fatalf("socket publish: %+v %v", res, err)
		}
		for k, d := range []time.Duration{t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), time.Since(t3)} {
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
	steps = [4]time.Duration{}
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
	b.Logf("socket put, mean per chunk: create %v, copy %v, seal %v, publish %v", per(steps[0]), per(steps[1]), per(steps[2]), per(steps[3]))
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
	shm, err := os.MkdirTemp("/dev/shm", "kvring-node-bench-")
	if err != nil {
		shm = b.TempDir()
	}
	b.Cleanup(func() { os.RemoveAll(shm) })
	cfg := DefaultConfig()
	cfg.GRPCAddr, cfg.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Membership = membership.LocalConfig("")
	cfg.Store = store.Config{DataDir: b.TempDir(), ShmDir: shm, MemoryLimit: 64 << 20}
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
