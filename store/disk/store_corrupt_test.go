package disk

import (
	"errors"
	"os"
	"testing"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/store"
)

// flipPayloadByte flips one payload byte of chunk i's record on disk.
func flipPayloadByte(t *testing.T, tr *Tier, ns string, i int) {
	t.Helper()
	tr.mu.Lock()
	l, ok := tr.idx[key(ns, chunkID(i))]
	path, ver := tr.regions[l.region].path, tr.regions[l.region].ver
	tr.mu.Unlock()
	if !ok {
		t.Fatalf("chunk %d is not on disk", i)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := payloadAt(ver, l) + int64(l.size)/2
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestACorruptedDiskChunkIsAMissThroughTheStore: the store reads disk
// chunks without the tier's own checksum pass (the promotion's copy checks
// them, or the store before serving the tier's buffer); a flipped byte is
// still ErrChecksum through Get and Lend, counted by the tier and dropped,
// and the other chunks read back exactly.
func TestACorruptedDiskChunkIsAMissThroughTheStore(t *testing.T) {
	const size, n = 256 << 10, 40
	st, tr := tiered(t, t.TempDir(), testutil.ShmDir(t, "disk-"), t.TempDir(), 2*mib)
	defer tr.Close()
	defer st.Close()
	for i := range n {
		put(t, st, "ns", i, size)
	}
	drain(t, tr)
	flipPayloadByte(t, tr, "ns", 0) // read by Lend: promoted
	flipPayloadByte(t, tr, "ns", 1) // read by Get: served from the tier's buffer
	if _, err := st.Lend("ns", chunkID(0)); !errors.Is(err, store.ErrChecksum) {
		t.Fatalf("Lend of a corrupted disk chunk: %v, want ErrChecksum", err)
	}
	if _, err := st.Get("ns", chunkID(1)); !errors.Is(err, store.ErrChecksum) {
		t.Fatalf("Get of a corrupted disk chunk: %v, want ErrChecksum", err)
	}
	if got := tr.Stats().ChecksumErrors; got != 2 {
		t.Fatalf("checksum errors %d, want 2", got)
	}
	for i := range 2 {
		if st.Contains("ns", chunkID(i)) {
			t.Fatalf("corrupted chunk %d still held", i)
		}
	}
	for i := 2; i < n; i++ {
		getExact(t, st, "ns", i, size, i%2 == 0)
	}
}

// payloadAt is the file offset of the payload of the record at l, in a
// region of version ver.
func payloadAt(ver uint32, l loc) int64 {
	return recordOff(ver, l.block) + payloadOff(ver, l.hdrLen(), l.size)
}

// TestAChunkLargerThanIntoMaxIsPromotedThroughTheCopy: SizeInto offers
// chunks up to intoMax to ReadInto and not larger ones, which Lend promotes
// through Read and the store's copy: their bytes come back exactly, and a
// flipped byte in one is still ErrChecksum, counted and dropped.
func TestAChunkLargerThanIntoMaxIsPromotedThroughTheCopy(t *testing.T) {
	const large = int(intoMax) + 64<<10
	st, tr := tiered(t, t.TempDir(), testutil.ShmDir(t, "disk-"), t.TempDir(), 4*mib)
	defer tr.Close()
	defer st.Close()
	put(t, st, "ns", 100, int(intoMax))
	for i := range 6 {
		put(t, st, "ns", i, large)
	}
	drain(t, tr)
	if _, ok := tr.SizeInto("ns", chunkID(0)); ok {
		t.Fatalf("SizeInto offers a chunk of %d bytes, more than intoMax", large)
	}
	if n, ok := tr.SizeInto("ns", chunkID(100)); !ok || n != int64(intoMax) {
		t.Fatalf("SizeInto of a chunk of intoMax bytes: %d %v", n, ok)
	}
	flipPayloadByte(t, tr, "ns", 0)
	before := st.Stats().LowerHits
	if _, err := st.Lend("ns", chunkID(0)); !errors.Is(err, store.ErrChecksum) {
		t.Fatalf("Lend of a corrupted large disk chunk: %v, want ErrChecksum", err)
	}
	if got := tr.Stats().ChecksumErrors; got != 1 {
		t.Fatalf("checksum errors %d, want 1", got)
	}
	if st.Contains("ns", chunkID(0)) {
		t.Fatal("the corrupted chunk is still held")
	}
	for i := 1; i < 4; i++ {
		getExact(t, st, "ns", i, large, true)
	}
	if st.Stats().LowerHits == before {
		t.Fatal("no chunk was read from disk")
	}
}
