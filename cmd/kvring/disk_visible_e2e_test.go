package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node"
)

// diskTierArgs give a node 8 MiB of shared memory over a 256 MiB disk tier
// in dir, so that nearly everything a test stores is held on disk only.
func diskTierArgs(dir string) []string {
	return []string{"--memory-limit", "8MiB", "--disk-dir", dir, "--disk-limit", "256MiB", "--disk-region-size", "8MiB"}
}

// heldAt is what node n's /v1/namespaces says it holds of each namespace.
func heldAt(t *testing.T, n *e2eNode) map[string]node.NamespaceInfo {
	t.Helper()
	var resp struct {
		Namespaces []node.NamespaceInfo `json:"namespaces"`
	}
	if code, err := getJSON(n.admin, "/v1/namespaces", &resp); err != nil || code != 200 {
		t.Fatalf("/v1/namespaces: %d %v", code, err)
	}
	out := map[string]node.NamespaceInfo{}
	for _, ns := range resp.Namespaces {
		out[ns.Name] = ns
	}
	return out
}

// scanAll lists every key SCAN returns at c.
func scanAll(t *testing.T, c *redis.Client) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	iter := c.Scan(context.Background(), 0, "*", 10).Iterator()
	for iter.Next(context.Background()) {
		got[iter.Val()] = true
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestDiskHeldValuesAreListedCountedAndDropped: values set through the
// Redis port into a node whose shared memory holds a few of them, the rest
// on disk: SCAN lists every key and DBSIZE counts them, `kvring namespaces`
// counts them (on disk too), and drop-namespace removes them from disk:
// afterwards GET misses each, SCAN lists nothing and the disk tier holds
// no chunk.
func TestDiskHeldValuesAreListedCountedAndDropped(t *testing.T) {
	t.Parallel()
	const size, n = 256 << 10, 96 // 24 MiB through 8 MiB of shared memory
	dir := t.TempDir()
	nd := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0",
		append(diskTierArgs(dir), "--resp-addr", "127.0.0.1:0", "--admin-actions")...)
	rc := redis.NewClient(&redis.Options{Addr: nd.respAddr(t), ReadTimeout: 30 * time.Second})
	defer rc.Close()
	ctx := context.Background()
	want := map[string]bool{}
	for i := range n {
		k := fmt.Sprintf("vllm@m@1@0@%04xkv_bytes", i)
		if err := rc.Set(ctx, k, diskChunk(i, size).Data, 0).Err(); err != nil {
			t.Fatal(err)
		}
		want[k] = true
	}
	st := nd.diskStats(t)
	if st.Disk.Chunks+st.Disk.QueuedChunks < n/2 {
		t.Fatalf("%d values in memory, %d on disk: the test needs most on disk", st.Chunks, st.Disk.Chunks+st.Disk.QueuedChunks)
	}
	if got := scanAll(t, rc); len(got) != n {
		t.Fatalf("SCAN listed %d keys, want %d (%d in shared memory)", len(got), n, st.Chunks)
	}
	if got := rc.DBSize(ctx).Val(); got != n {
		t.Fatalf("DBSIZE %d, want %d", got, n)
	}
	var ns node.NamespaceInfo
	for name, u := range heldAt(t, nd) {
		if strings.HasPrefix(name, "resp:") {
			ns = u
		}
	}
	if ns.Chunks != n || ns.DiskChunks < int64(n)-st.Chunks {
		t.Fatalf("/v1/namespaces: %d chunks, %d on disk; want %d, at least %d on disk", ns.Chunks, ns.DiskChunks, n, int64(n)-st.Chunks)
	}
	table := mustCLI(t, nil, "namespaces", "--admin", nd.admin).stdout
	if !strings.Contains(table, fmt.Sprintf("%d (", ns.DiskChunks)) {
		t.Fatalf("kvring namespaces does not show the %d chunks on disk:\n%s", ns.DiskChunks, table)
	}
	mustCLI(t, nil, "drop-namespace", ns.Name, "--admin", nd.admin)
	for k := range want {
		if err := rc.Get(ctx, k).Err(); err != redis.Nil {
			t.Fatalf("GET %s after the drop: %v, want a miss", k, err)
		}
	}
	if got := scanAll(t, rc); len(got) != 0 {
		t.Fatalf("SCAN after the drop listed %d keys", len(got))
	}
	if d := nd.diskStats(t).Disk; d.Chunks+d.QueuedChunks != 0 {
		t.Fatalf("the disk tier holds %d chunks after the drop", d.Chunks+d.QueuedChunks)
	}
}

// TestDiskHeldChunksAreHandedOff: a node holding 200 chunks, nearly all of
// them on its disk tier, hands a joining node its share; afterwards each
// chunk is held by exactly one of them (counting both tiers) and reads back
// byte-exact.
func TestDiskHeldChunksAreHandedOff(t *testing.T) {
	if testing.Short() {
		t.Skip("two nodes and a hand-off")
	}
	t.Parallel()
	const size, n = 256 << 10, 200 // 50 MiB through 8 MiB of shared memory
	args := append(append([]string(nil), noSettle...), diskTierArgs(t.TempDir())...)
	a := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", args...)
	c, _ := newEngine(t, []string{a.grpc}, 1, 1)
	testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	chunks := make([]client.Chunk, n)
	for i := range chunks {
		chunks[i] = diskChunk(5000+i, size)
	}
	for lo := 0; lo < n; lo += 8 {
		putAll(t, c, chunks[lo:lo+8], 1)
	}
	if st := a.diskStats(t); st.Disk.Chunks+st.Disk.QueuedChunks < n/2 {
		t.Fatalf("only %d chunks on disk", st.Disk.Chunks+st.Disk.QueuedChunks)
	}
	args = append(append([]string(nil), noSettle...), diskTierArgs(t.TempDir())...)
	b := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", append(args, "--join", a.gossip)...)
	waitRing(t, a, b)
	held := func(x *e2eNode) int64 { return heldAt(t, x)["e2e/llama"].Chunks }
	testutil.Eventually(t, "the hand-off to the new node to end", 120*time.Second, func() bool {
		return handoffIdle(a) && handoffIdle(b) && held(a)+held(b) == n && held(b) > 0
	})
	t.Logf("the new node holds %d of %d chunks (%d on its disk)", held(b), n, heldAt(t, b)["e2e/llama"].DiskChunks)
	for lo := 0; lo < n; lo += 16 {
		ids := make([]client.ChunkID, 0, 16)
		for _, ch := range chunks[lo:min(lo+16, n)] {
			ids = append(ids, ch.ID)
		}
		res, err := c.Get(context.Background(), ids)
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range res {
			if !r.Found || !bytes.Equal(r.Data, chunks[lo+k].Data) {
				t.Fatalf("chunk %d after the hand-off: found %v (%s)", lo+k, r.Found, r.Reason)
			}
		}
	}
}
