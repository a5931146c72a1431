package disk

import (
	"errors"
	"testing"

	"github.com/kvring/kvring/internal/crc32c"
	"github.com/kvring/kvring/store"
)

// mixedSizes are chunk sizes around alignedPayloadMin: packed records of
// all lengths between block-aligned ones.
var mixedSizes = []int{16 << 10, 1000, 100_000, 16<<10 + 300, 5, 70_000, 64<<10 - 1, 64 << 10, 40_000}

// offloadMixed offloads n chunks of mixedSizes in batches of 4, each
// written before the next (a batch's end is padded, the next starts at a
// block), and returns their sizes.
func offloadMixed(t *testing.T, tr *Tier, n int) []int {
	t.Helper()
	sizes := make([]int, n)
	for i := range n {
		sizes[i] = mixedSizes[i%len(mixedSizes)]
		if !offload(tr, "ns", i, sizes[i]) {
			t.Fatalf("offload %d dropped", i)
		}
		if i%4 == 3 {
			tr.Flush()
		}
	}
	drain(t, tr)
	return sizes
}

func readAll(t *testing.T, tr *Tier, sizes []int, when string) {
	t.Helper()
	for i, size := range sizes {
		if err := readBack(t, tr, "ns", i, size); err != nil {
			t.Fatalf("%s: chunk %d (%d bytes): %v", when, i, size, err)
		}
	}
}

// TestSmallRecordsArePackedNotPaddedToABlock: a 1 MiB region holds 60 or
// more records of 16 KiB chunks (padded to 4 KiB each it held 49).
func TestSmallRecordsArePackedNotPaddedToABlock(t *testing.T) {
	tr := openTier(t, testConfig(t, t.TempDir()))
	for i := range 200 {
		offload(tr, "ns", i, 16<<10)
	}
	drain(t, tr)
	tr.mu.Lock()
	first := tr.order[0]
	n := 0
	for _, l := range tr.idx {
		if l.region == first {
			n++
		}
	}
	tr.mu.Unlock()
	if n < 60 {
		t.Fatalf("a 1 MiB region holds %d chunks of 16 KiB, want 60 or more", n)
	}
	readAll(t, tr, []int{16 << 10, 16 << 10, 16 << 10}, "packed")
}

// TestPackedRecordsAreFoundAgainFromFootersAndByScanning: records of all
// sizes, packed and block-aligned, read back after a clean stop (footers)
// and after a kill (the active region scanned).
func TestPackedRecordsAreFoundAgainFromFootersAndByScanning(t *testing.T) {
	dir := t.TempDir()
	tr, err := Open(testConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	sizes := offloadMixed(t, tr, 60)
	readAll(t, tr, sizes, "before a restart")
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err = Open(testConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, tr, sizes, "after a clean stop")
	for i := 60; i < 75; i++ { // into a new active region, then killed
		size := mixedSizes[i%len(mixedSizes)]
		offload(tr, "ns", i, size)
		sizes = append(sizes, size)
		if i%4 == 3 {
			tr.Flush()
		}
	}
	crash(t, tr)
	tr = openTier(t, testConfig(t, dir))
	if got := tr.Stats().Chunks; got != int64(len(sizes)) {
		t.Fatalf("after a kill the tier holds %d chunks, want %d", got, len(sizes))
	}
	readAll(t, tr, sizes, "after a kill")
}

// TestVersion1RegionsAreReadAfterAnUpgrade: regions written in format
// version 1 (every record padded to a block) are found again, sealed or
// scanned, and read by a tier that writes version 2 next to them.
func TestVersion1RegionsAreReadAfterAnUpgrade(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.formatVersion = 1
	tr, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sizes := offloadMixed(t, tr, 30)
	crash(t, tr) // sealed regions and a scanned one
	tr = openTier(t, testConfig(t, dir))
	readAll(t, tr, sizes, "version 1 regions")
	more := offloadMixed(t, tr, 40)[30:]
	for i, size := range more {
		if err := readBack(t, tr, "ns", 30+i, size); err != nil {
			t.Fatalf("version 2 next to version 1: %v", err)
		}
	}
	tr.mu.Lock()
	vers := map[uint32]bool{}
	for _, r := range tr.regions {
		vers[r.ver] = true
	}
	tr.mu.Unlock()
	if !vers[1] || !vers[2] {
		t.Fatalf("region versions %v, want 1 and 2", vers)
	}
}

// TestALargeChunkIsReadStraightIntoAnAlignedBuffer: ReadInto lands a chunk
// of alignedPayloadMin bytes or more in the caller's block-aligned buffer
// (SizeInto reports it; not a smaller one), checksum and meta included.
func TestALargeChunkIsReadStraightIntoAnAlignedBuffer(t *testing.T) {
	tr := openTier(t, testConfig(t, t.TempDir()))
	sizes := []int{100_000, 256 << 10, 16 << 10}
	for i, size := range sizes {
		offload(tr, "ns", i, size)
	}
	drain(t, tr)
	for i, size := range sizes {
		n, ok := tr.SizeInto("ns", chunkID(i))
		if want := size >= alignedPayloadMin; ok != want || ok && n != int64(size) {
			t.Fatalf("SizeInto of %d bytes: %d %v", size, n, ok)
		}
		for _, dst := range [][]byte{alignedBuf(align(int64(size)))[:size], make([]byte, size+1)[1:]} {
			clear(dst)
			c, err := tr.ReadInto("ns", chunkID(i), dst)
			if err != nil {
				t.Fatal(err)
			}
			if &c.Bytes[0] != &dst[0] || c.CRC != crc32c.Checksum(chunkBytes(i, size)) || string(c.Meta) != "m" ||
				string(dst) != string(chunkBytes(i, size)) {
				t.Fatalf("ReadInto of %d bytes: wrong bytes, checksum or meta", size)
			}
			c.Release()
		}
	}
	if _, err := tr.ReadInto("ns", chunkID(9), make([]byte, 10)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ReadInto of an unknown chunk: %v", err)
	}
}
