package store

import (
	"bytes"
	"testing"
)

// TestCatalogCompactionKeepsEachKeysLastOperation: a compacted batch has the
// same effect as the batch in order; segment operations keep their order.
func TestCatalogCompactionKeepsEachKeysLastOperation(t *testing.T) {
	k := func(seg, slot int) [8]byte { return chunkKeyBytes(uint32(seg), int32(slot)) }
	ops := []catOp{
		{kind: opSegmentPut, key: segKey(2)},
		{kind: opChunkPut, key: k(2, 5), val: []byte("a")},
		{kind: opChunkPut, key: k(1, 9), val: []byte("b")},
		{kind: opChunkDel, key: k(2, 5)},
		{kind: opSegmentDel, key: segKey(1)},
		{kind: opChunkPut, key: k(2, 5), val: []byte("c")},
		{kind: opChunkDel, key: k(1, 9)},
		{kind: opChunkPut, key: k(1, 3), val: []byte("d")},
	}
	got := compactOps(ops)
	want := []catOp{
		{kind: opSegmentPut, key: segKey(2)},
		{kind: opSegmentDel, key: segKey(1)},
		{kind: opChunkPut, key: k(1, 3), val: []byte("d")},
		{kind: opChunkDel, key: k(1, 9)},
		{kind: opChunkPut, key: k(2, 5), val: []byte("c")},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d ops, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].kind != want[i].kind || got[i].key != want[i].key || !bytes.Equal(got[i].val, want[i].val) {
			t.Fatalf("op %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
