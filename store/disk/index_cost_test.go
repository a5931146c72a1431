package disk

import (
	"runtime"
	"testing"
)

// TestIndexCostPerChunk measures what the in-memory index costs per chunk
// on disk: the map from key to loc and the region's key list, after a
// million inserts (the figure docs/disk-tier.md and Stats report).
func TestIndexCostPerChunk(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~60 MB")
	}
	const n = 1 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	idx := make(map[uint64]loc)
	keys := make([]uint64, 0)
	for i := range n {
		k := uint64(i)*0x9e3779b97f4a7c15 + 1
		idx[k] = loc{region: uint32(i >> 10), block: uint32(i), size: 1 << 18}
		keys = append(keys, k)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("index: %.1f bytes per chunk (map %d entries + key list)", per, len(idx))
	if per > float64(indexBytesPerChunk)*1.5 {
		t.Errorf("index costs %.1f bytes per chunk, documented %d", per, indexBytesPerChunk)
	}
	runtime.KeepAlive(idx)
	runtime.KeepAlive(keys)
}
