package client

import (
	"bytes"
	"testing"
)

// TestGroupKeysAreTheFirstIDOfEachGroup: chunk i's key is the id of chunk
// i - i%k; k <= 1 keys every chunk by itself; the runs sent on the wire
// cover the chunks in order, one run per group.
func TestGroupKeysAreTheFirstIDOfEachGroup(t *testing.T) {
	ids := make([]ChunkID, 7)
	for i := range ids {
		ids[i][0] = byte(i + 1)
	}
	keys := GroupKeys(ids, 3)
	for i, want := range []int{0, 0, 0, 3, 3, 3, 6} {
		if keys[i] != ids[want] {
			t.Fatalf("key %d = id %d, want id %d", i, keys[i][0]-1, want)
		}
	}
	for _, k := range []int{0, 1} {
		if got := GroupKeys(ids, k); got[4] != ids[4] {
			t.Fatalf("k=%d: chunk 4 keyed by id %d", k, got[4][0]-1)
		}
	}
	raw := make([][]byte, len(keys))
	for i := range keys {
		raw[i] = keys[i][:]
	}
	runs := groupRuns(raw)
	if len(runs) != 3 || runs[0].Count != 3 || runs[1].Count != 3 || runs[2].Count != 1 ||
		!bytes.Equal(runs[1].Key, ids[3][:]) {
		t.Fatalf("runs %v", runs)
	}
	if groupRuns(nil) != nil {
		t.Fatal("no keys gave runs")
	}
}
