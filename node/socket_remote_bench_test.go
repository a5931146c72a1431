package node

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/store"
)

// BenchmarkSocketGetRemote reads, through node A's local socket, 2 MiB
// chunks that only node B holds (two nodes in this process, one copy per
// chunk): each kvring_get fetches the chunk from B and copies it into a
// blob handed to the client, which reads every byte and releases it. It
// reports GB/s of chunk bytes over the whole loop. This file uses only APIs
// the build before the coordinator's plain read API had too, so the same
// file measures both (issue 44's A/B).
//
//	go test -run '^$' -bench SocketGetRemote -benchtime 200x ./node/
func BenchmarkSocketGetRemote(b *testing.B) {
	const size = 2 << 20
	a, cfg := startBenchNode(b, 256<<20)
	nb, _ := startBenchNode(b, 256<<20, func(c *Config) {
		c.Socket.Path = ""
		c.Membership.Join = []string{a.GossipAddr()}
	})
	testutil.Eventually(b, "both nodes on the ring", 30*time.Second, func() bool {
		return a.Ring() != nil && a.Ring().Len() == 2 && nb.Ring() != nil && nb.Ring().Len() == 2
	})
	sock, err := local.Dial(b.Context(), local.Config{Path: cfg.Socket.Path})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sock.Close() })
	ns, err := sock.RegisterNamespace("bench/remote", local.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, 1, 1)
	if err != nil {
		b.Fatal(err)
	}
	var remote [][32]byte
	for i := 0; len(remote) < 8 && i < 256; i++ {
		id := sha256.Sum256(fmt.Appendf(nil, "remote %d", i))
		publishFilled(b, sock, ns, id, size, i)
		if !a.Store().Contains(namespace.StoreName(ns.Name, ns.Fingerprint), store.ID(id)) {
			remote = append(remote, id)
		}
	}
	if len(remote) == 0 {
		b.Fatal("no chunk is held by node B only")
	}
	var sink uint64
	b.SetBytes(size)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		got, err := sock.GetChunks(ns, remote[i%len(remote):i%len(remote)+1], nil)
		i++
		if err != nil || len(got) != 1 || !got[0].Found {
			b.Fatalf("get of a chunk B holds: %+v %v", got, err)
		}
		sink += testutil.SumWords(got[0].Blob.Data)
		if _, err := sock.ReleaseAll([]uint64{got[0].BlobID}); err != nil {
			b.Fatal(err)
		}
	}
	if sink == 1 {
		b.Log(sink)
	}
}

// publishFilled publishes through sock a chunk id of size bytes derived
// from seed, written into a socket blob, and fails b unless it is stored.
func publishFilled(b *testing.B, sock *local.Client, ns local.Namespace, id [32]byte, size, seed int) {
	b.Helper()
	blob, err := sock.CreateBlob(int64(size))
	if err != nil {
		b.Fatal(err)
	}
	for k := range blob.Data {
		blob.Data[k] = byte(k*7 + seed)
	}
	if err := sock.Seal(blob.ID); err != nil {
		b.Fatal(err)
	}
	res, err := sock.PublishAndDelete(ns, [][32]byte{id}, []uint64{blob.ID}, nil)
	if err != nil || res[0].Status != "stored" {
		b.Fatalf("publish: %+v %v", res, err)
	}
}
