package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node"
	"github.com/kvring/kvring/store/disk"
)

// diskFaultNode starts a node with 8 MiB of shared memory over a disk tier
// in dir that retries a failed write after 1 s, and a connected client.
func diskFaultNode(t *testing.T, dir string) (*e2eNode, *client.Client) {
	t.Helper()
	nd := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0",
		"--memory-limit", "8MiB", "--disk-dir", dir, "--disk-limit", "64MiB", "--disk-region-size", "2MiB",
		"--disk-retry-after", "1s")
	c, _ := newEngine(t, []string{nd.grpc}, 0, 0)
	testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	return nd, c
}

// putChunks puts chunks from..from+n of size bytes and fails unless each
// is stored: shared memory takes every put whatever the disk does.
func putChunks(t *testing.T, c *client.Client, from, n, size int) {
	t.Helper()
	for i := from; i < from+n; i += 4 {
		var batch []client.Chunk
		for j := i; j < min(i+4, from+n); j++ {
			batch = append(batch, diskChunk(j, size))
		}
		res, err := c.Put(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range res {
			if r.Status != client.Stored {
				t.Fatalf("put of chunk %d: %+v", i+k, r)
			}
		}
	}
}

// checkServed reads chunks from..from+n: each lookup-counted chunk must read
// back byte-exact or miss, never other bytes; it returns how many were
// found. With all set, every chunk must be found.
func checkServed(t *testing.T, c *client.Client, from, n, size int, all bool) int {
	t.Helper()
	found := 0
	for i := from; i < from+n; i += 8 {
		var ids []client.ChunkID
		for j := i; j < min(i+8, from+n); j++ {
			ids = append(ids, diskChunk(j, size).ID)
		}
		res, err := c.Get(context.Background(), ids)
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range res {
			switch {
			case r.Found && !bytes.Equal(r.Data, diskChunk(i+k, size).Data):
				t.Fatalf("chunk %d: wrong bytes", i+k)
			case r.Found:
				found++
			case all:
				t.Fatalf("chunk %d: not found (%s)", i+k, r.Reason)
			}
		}
	}
	return found
}

// diskReadiness is n's /readyz answer; it fails unless the node is ready.
func diskReadiness(t *testing.T, n *e2eNode) node.Readiness {
	t.Helper()
	var rd node.Readiness
	if code, err := getJSON(n.admin, "/readyz", &rd); err != nil || code != 200 || !rd.Ready {
		t.Fatalf("/readyz: %d %v %+v: the node must stay ready with a failing disk tier", code, err, rd)
	}
	return rd
}

// degradedUntilFixed checks a node whose disk tier failed: /readyz (ready)
// names the disk error, kvring_disk_healthy is 0, offloads are dropped and
// counted, and shared memory keeps taking and serving puts.
func degradedUntilFixed(t *testing.T, nd *e2eNode, c *client.Client, from, size int) {
	t.Helper()
	testutil.Eventually(t, "/readyz to name the disk error", 30*time.Second, func() bool {
		return diskReadiness(t, nd).DiskError != ""
	})
	t.Logf("/readyz disk_error: %s", diskReadiness(t, nd).DiskError)
	if v, ok := metricValue(t, nd, "kvring_disk_healthy"); !ok || v != 0 {
		t.Fatalf("kvring_disk_healthy %v (%v), want 0", v, ok)
	}
	putChunks(t, c, from, 16, size) // 4 MiB more: evictions while degraded
	checkServed(t, c, from+8, 8, size, true)
	st := nd.diskStats(t)
	if st.Disk.Drops[disk.DropIOError]+st.Disk.Drops[disk.DropDegraded] == 0 {
		t.Fatalf("no offload was counted dropped: %+v", st.Disk.Drops)
	}
}

// TestAFullDiskDegradesTheTierAndSharedMemoryServes: the disk tier's
// directory is on a 16 MiB tmpfs that another writer fills while the node
// runs. Puts then evict: the tier has no room for a region, degrades (ENOSPC),
// says so in /readyz and its metrics, and drops offloads; every put is still
// stored and served from shared memory, nothing read is wrong. Once the
// space is back, the tier offloads again by itself (--disk-retry-after 1s).
func TestAFullDiskDegradesTheTierAndSharedMemoryServes(t *testing.T) {
	t.Parallel()
	fs := testutil.MountTmpfs(t, "16m")
	nd, c := diskFaultNode(t, filepath.Join(fs, "disk"))
	const size = 256 << 10
	putChunks(t, c, 0, 16, size) // 4 MiB: no eviction yet
	ballast := filepath.Join(fs, "ballast")
	testutil.FillFile(t, ballast, math.MaxInt64)
	putChunks(t, c, 100, 64, size) // 16 MiB through 8 MiB of memory: evictions
	degradedUntilFixed(t, nd, c, 1000, size)
	t.Logf("%d of the first 80 chunks still served", checkServed(t, c, 0, 16, size, false)+checkServed(t, c, 100, 64, size, false))

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	next := 2000
	testutil.Eventually(t, "the tier to offload again", 30*time.Second, func() bool {
		putChunks(t, c, next, 4, size)
		next += 4
		return diskReadiness(t, nd).DiskError == ""
	})
	if v, ok := metricValue(t, nd, "kvring_disk_healthy"); !ok || v != 1 {
		t.Fatalf("kvring_disk_healthy %v (%v) after the space came back, want 1", v, ok)
	}
}

// TestADeletedDiskDirectoryDegradesTheTier: the disk tier's directory is
// removed under a running node. The tier notices, degrades (/readyz,
// metrics, dropped offloads), and shared memory keeps taking and serving
// puts; nothing read is wrong.
func TestADeletedDiskDirectoryDegradesTheTier(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "disk")
	nd, c := diskFaultNode(t, dir)
	const size = 256 << 10
	putChunks(t, c, 0, 48, size)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	putChunks(t, c, 100, 16, size)
	degradedUntilFixed(t, nd, c, 1000, size)
	t.Logf("%d of the first 48 chunks still served", checkServed(t, c, 0, 48, size, false))
}
