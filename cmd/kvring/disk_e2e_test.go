package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/store/disk"
)

// diskFS returns a directory for a disk tier on a filesystem of its own: a
// loop-mounted ext4 image of size bytes (O_DIRECT works there, and its size
// is a real limit), unmounted when the test ends. Without root or the
// tools, it falls back to a temporary directory.
func diskFS(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Logf("not root: the disk tier goes to %s", dir)
		return dir
	}
	img := filepath.Join(dir, "disk.img")
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o750); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err == nil {
		err = f.Truncate(size)
		f.Close()
	}
	if err == nil {
		var out []byte
		out, err = exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput()
		if err != nil {
			t.Logf("mkfs.ext4: %s", out)
		}
	}
	if err == nil {
		var out []byte
		if out, err = exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
			t.Logf("mount: %s", out)
		}
	}
	if err != nil {
		t.Logf("no loop-mounted ext4 (%v): the disk tier goes to %s", err, dir)
		return dir
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
				t.Errorf("cannot unmount %s: %v", mnt, err)
			}
		}
	})
	return filepath.Join(mnt, "kvring")
}

type diskNodeStats struct {
	Chunks    int64       `json:"chunks"`
	LowerHits uint64      `json:"lower_hits"`
	Disk      *disk.Stats `json:"disk"`
}

func (n *e2eNode) diskStats(t *testing.T) diskNodeStats {
	t.Helper()
	resp, err := http.Get("http://" + n.admin + "/v1/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st diskNodeStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Disk == nil {
		t.Fatal("/v1/stats has no disk tier")
	}
	return st
}

// diskChunk derives chunk i's id and size bytes from i (cheaper to make
// than e2eChunk's, for hundreds of MiB).
func diskChunk(i, size int) client.Chunk {
	seed := sha256.Sum256(fmt.Appendf(nil, "disk-chunk-%d", i))
	data := make([]byte, size)
	_, _ = rand.NewChaCha8(seed).Read(data)
	return client.Chunk{ID: client.ChunkID(seed), Data: data}
}

// TestADiskTierHoldsWhatSharedMemoryCannot: a node with 64 MiB of shared
// memory and 1 GiB of disk stores 600 MiB of chunks; every acknowledged
// chunk is held (a lookup counts it) and reads back byte-exact, most of
// them from disk. After SIGKILL and a restart the disk-held chunks are
// found again and read back byte-exact; after a clean stop (SIGTERM) too,
// and then no region is scanned that the kill did not leave unsealed.
func TestADiskTierHoldsWhatSharedMemoryCannot(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 600 MiB")
	}
	t.Parallel()
	const size, n = 1 << 20, 600
	dir := diskFS(t, 1200<<20)
	data, shm := t.TempDir(), shmDir(t)
	args := []string{"--memory-limit", "64MiB", "--disk-dir", dir, "--disk-limit", "1GiB", "--disk-queue", "256MiB"}
	node := startNode(t, data, shm, "127.0.0.1:0", "127.0.0.1:0", args...)
	c, _ := newEngine(t, []string{node.grpc}, 0, 0)
	ctx := context.Background()
	testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })

	start := time.Now()
	ids := make([]client.ChunkID, n)
	putRange := func(c *client.Client, lo, hi int) {
		t.Helper()
		for i := lo; i < hi; i += 8 {
			batch := make([]client.Chunk, 0, 8)
			for j := i; j < min(i+8, hi); j++ {
				ch := diskChunk(j, size)
				if j < n {
					ids[j] = ch.ID
				}
				batch = append(batch, ch)
			}
			res, err := c.Put(ctx, batch)
			if err != nil {
				t.Fatalf("put of chunks %d..: %v", i, err)
			}
			for k, r := range res {
				if !r.Status.Held() {
					t.Fatalf("chunk %d: %+v, want stored", i+k, r)
				}
			}
		}
	}
	putRange(c, 0, n)
	st := node.diskStats(t)
	t.Logf("%v: after the puts: %d chunks in shared memory, disk %+v", time.Since(start), st.Chunks, *st.Disk)
	if st.Chunks >= n/4 || st.Disk.Chunks+st.Disk.QueuedChunks < n-st.Chunks {
		t.Fatalf("%d chunks in memory and %d on disk for %d stored", st.Chunks, st.Disk.Chunks+st.Disk.QueuedChunks, n)
	}
	checkAll := func(node *e2eNode, c *client.Client, when string) {
		t.Helper()
		got, err := c.Lookup(ctx, ids, 0)
		if err != nil || got.Held != n {
			t.Fatalf("%s: lookup counts %d of %d (%v)", when, got.Held, n, err)
		}
		for i := 0; i < n; i += 16 {
			res, err := c.Get(ctx, ids[i:min(i+16, n)])
			if err != nil {
				t.Fatalf("%s: get: %v", when, err)
			}
			for k, r := range res {
				if !r.Found || !bytes.Equal(r.Data, diskChunk(i+k, size).Data) {
					t.Fatalf("%s: chunk %d not read back byte-exact (found %v: %s)", when, i+k, r.Found, r.Reason)
				}
			}
		}
	}
	checkAll(node, c, "before the kill")
	t.Logf("%v: read back", time.Since(start))
	if st := node.diskStats(t); st.LowerHits == 0 || st.Disk.Drops[disk.DropQueueFull] != 0 || st.Disk.ChecksumErrors != 0 {
		t.Fatalf("after the reads: %+v %+v", st, *st.Disk)
	}

	node.kill(t)
	node = restartNode(t, node, args...)
	t.Logf("%v: restarted", time.Since(start))
	c2, _ := newEngine(t, []string{node.grpc}, 0, 0)
	testutil.Eventually(t, "the client to connect again", 10*time.Second, func() bool { return c2.State().Status == client.ConnConnected })
	if st := node.diskStats(t); st.Disk.Chunks < n-st.Chunks {
		t.Fatalf("after the restart: %d chunks in memory, %d on disk", st.Chunks, st.Disk.Chunks)
	}
	checkAll(node, c2, "after SIGKILL and restart")
	t.Logf("%v: read back again", time.Since(start))
	// The region being written at the kill has no footer and is scanned at
	// every start; a clean stop writes the footer of the one it writes
	// (the 100 chunks put now push as many to disk, into a new region).
	scannedAfterKill := scannedRegions(t, lineContaining(node.logs(), "disk tier opened"))
	putRange(c2, n, n+100)

	stopNode(t, node)
	node = restartNode(t, node, args...)
	c3, _ := newEngine(t, []string{node.grpc}, 0, 0)
	testutil.Eventually(t, "the client to connect after the clean stop", 10*time.Second, func() bool { return c3.State().Status == client.ConnConnected })
	if l := lineContaining(node.logs(), "disk tier opened"); scannedRegions(t, l) > scannedAfterKill {
		t.Fatalf("a clean stop left a region without its footer (%d were scanned after the kill): %s", scannedAfterKill, l)
	}
	checkAll(node, c3, "after a clean stop and restart")
}

// scannedRegions is the scanned_regions of a "disk tier opened" log line.
func scannedRegions(t *testing.T, line string) int {
	t.Helper()
	_, v, _ := strings.Cut(line, "scanned_regions=")
	f := strings.Fields(v)
	if len(f) == 0 {
		t.Fatalf("no scanned_regions in %q", line)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatalf("scanned_regions in %q: %v", line, err)
	}
	return n
}

// TestADamagedDiskRegionIsAMissNeverWrongBytes: region files damaged under
// a running node (bytes flipped all over them) make reads of the chunks
// they held misses, counted, never wrong bytes; the node keeps serving.
func TestADamagedDiskRegionIsAMissNeverWrongBytes(t *testing.T) {
	t.Parallel()
	const size, n = 256 << 10, 64 // 16 MiB through 8 MiB of shared memory
	dir := filepath.Join(t.TempDir(), "disk")
	node := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0",
		"--memory-limit", "8MiB", "--disk-dir", dir, "--disk-limit", "64MiB", "--disk-region-size", "4MiB")
	c, _ := newEngine(t, []string{node.grpc}, 0, 0)
	ctx := context.Background()
	testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	ids := make([]client.ChunkID, n)
	for i := 0; i < n; i += 8 {
		var batch []client.Chunk
		for j := i; j < i+8; j++ {
			ch := diskChunk(j, size)
			ids[j] = ch.ID
			batch = append(batch, ch)
		}
		if _, err := c.Put(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, "the offloads to reach the disk", 30*time.Second, func() bool {
		return node.diskStats(t).Disk.QueuedChunks == 0
	})
	regions, _ := filepath.Glob(filepath.Join(dir, "region-*.kvr"))
	if len(regions) == 0 {
		t.Fatal("no region files")
	}
	for _, p := range regions { // flip one byte in every 64 KiB
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		b := []byte{0}
		for off := int64(8 << 10); off < st.Size(); off += 64 << 10 {
			f.ReadAt(b, off)
			b[0] ^= 0x5a
			f.WriteAt(b, off)
		}
		f.Close()
	}
	var found, missed int
	start := time.Now()
	for i := 0; i < n; i += 8 {
		res, err := c.Get(ctx, ids[i:i+8])
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range res {
			if !r.Found {
				missed++
				continue
			}
			found++
			if !bytes.Equal(r.Data, diskChunk(i+k, size).Data) {
				t.Fatalf("chunk %d: wrong bytes from a damaged disk", i+k)
			}
		}
	}
	st := node.diskStats(t)
	t.Logf("found %d, missed %d in %v; disk %+v", found, missed, time.Since(start), *st.Disk)
	if missed == 0 || st.Disk.ChecksumErrors == 0 {
		t.Fatalf("damaged regions gave no misses (%d) or no checksum errors (%d)", missed, st.Disk.ChecksumErrors)
	}
	if res, err := c.Put(ctx, []client.Chunk{diskChunk(1000, size)}); err != nil || !res[0].Status.Held() {
		t.Fatalf("a put after the damage: %v %+v", err, res)
	}
}
