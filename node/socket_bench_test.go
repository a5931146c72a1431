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
// chunk into the mapping, seal, publish to the node as owner, release and
// delete the blob) and through the gRPC SDK (client.Put to the same node).
// It reports each path's MB/s and socket/grpc, the speed-up.
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
	cfg.Store = store.Config{DataDir: b.TempDir(), ShmDir: shm, MemoryLimit: 512 << 20}
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
	var sockTime, grpcTime time.Duration
	b.SetBytes(int64(2 * size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		binary.LittleEndian.PutUint64(src, uint64(i)) // distinct bytes per chunk

		t0 := time.Now()
		blob, err := sock.CreateBlob(int64(size))
		if err != nil {
			b.Fatal(err)
		}
		copy(blob.Data, src)
		if err := sock.Seal(blob.ID); err != nil {
			b.Fatal(err)
		}
		res, err := sock.Publish(ns, [][32]byte{idOf('s', i)}, []uint64{blob.ID}, nil)
		if err != nil || res[0].Status != "stored" {
			b.Fatalf("socket publish: %+v %v", res, err)
		}
		if err := sock.Release(blob.ID); err != nil {
			b.Fatal(err)
		}
		if err := sock.Delete(blob.ID); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		out, err := sdk.Put(b.Context(), []client.Chunk{{ID: client.ChunkID(idOf('g', i)), Data: src}})
		if err != nil || out[0].Status != client.Stored {
			b.Fatalf("gRPC put: %+v %v", out, err)
		}
		t2 := time.Now()
		sockTime += t1.Sub(t0)
		grpcTime += t2.Sub(t1)
	}
	b.StopTimer()
	b.Logf("segments mapped by the socket client: %d; store segments: %d", sock.Segments(), n.Store().Stats().Segments)
	mb := float64(size) * float64(b.N) / 1e6
	b.ReportMetric(mb/sockTime.Seconds(), "socket-MB/s")
	b.ReportMetric(mb/grpcTime.Seconds(), "grpc-MB/s")
	b.ReportMetric(grpcTime.Seconds()/sockTime.Seconds(), "socket/grpc")
}
