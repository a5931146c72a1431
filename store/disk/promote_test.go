package disk

import (
	"testing"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/store"
)

// lendFromDisk lends chunk i and reports whether the store read it from
// the tier (a Lower hit) rather than from shared memory.
func lendFromDisk(t *testing.T, st *store.Store, i int) bool {
	t.Helper()
	before := st.Stats().LowerHits
	v, err := st.Lend("ns", chunkID(i))
	if err != nil {
		t.Fatalf("Lend %d: %v", i, err)
	}
	v.Release()
	return st.Stats().LowerHits > before
}

// TestAChunkPromotedFromDiskIsTheNextToLeaveSharedMemory: a disk hit
// promoted into shared memory is evicted by the next put (the tier holds it,
// nothing is lost), so shared memory keeps the chunks the tier does not hold;
// a hit in shared memory meanwhile makes it the newest.
func TestAChunkPromotedFromDiskIsTheNextToLeaveSharedMemory(t *testing.T) {
	const size = 256 << 10 // 8 chunks fill 2 MiB of shared memory
	st, tr := tiered(t, t.TempDir(), testutil.ShmDir(t, "disk-"), t.TempDir(), 2*mib)
	defer tr.Close()
	defer st.Close()
	for i := range 20 {
		put(t, st, "ns", i, size)
	}
	drain(t, tr)
	if !lendFromDisk(t, st, 0) {
		t.Fatal("chunk 0 was not read from disk")
	}
	put(t, st, "ns", 100, size)
	if !lendFromDisk(t, st, 0) {
		t.Fatal("chunk 0, promoted from disk, stayed in shared memory past the next put")
	}
	if lendFromDisk(t, st, 0) { // a hit in shared memory: now the newest
		t.Fatal("chunk 0 was read from disk right after its promotion")
	}
	put(t, st, "ns", 101, size)
	put(t, st, "ns", 102, size)
	if lendFromDisk(t, st, 0) {
		t.Fatal("chunk 0, hit in shared memory, left it after two puts")
	}
}
