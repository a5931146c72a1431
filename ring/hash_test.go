package ring

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestKeyHashMatchesItsDefinition checks both code paths (stack buffer and streaming) against the documented
// definition xxHash64(len(namespace) ‖ namespace ‖ id).
func TestKeyHashMatchesItsDefinition(t *testing.T) {
	t.Parallel()
	id := testID("chunk")
	for _, ns := range []string{"", "llama3-8b/bf16/16/tp0", strings.Repeat("n", 120), strings.Repeat("long", 100)} {
		in := binary.LittleEndian.AppendUint64(nil, uint64(len(ns)))
		in = append(append(in, ns...), id...)
		if got, want := keyHash(ns, id), xxhash.Sum64(in); got != want {
			t.Errorf("keyHash(namespace of %d bytes) = %#x, want %#x", len(ns), got, want)
		}
	}
}

func TestLookupsDoNotAllocate(t *testing.T) {
	r := mustNew(t, testMembers("node-", 5), 1, Config{PartitionCount: 101, ReplicationFactor: 3, Load: 1.25, VirtualNodes: 8, Hasher: HasherXXHash64})
	id, buf := testID("chunk"), make([]Member, 0, 3)
	if n := testing.AllocsPerRun(100, func() {
		_ = r.Partition("llama3-8b/bf16/16/tp0", id)
		_, _ = r.Primary("llama3-8b/bf16/16/tp0", id)
		buf = r.AppendOwners(buf[:0], "llama3-8b/bf16/16/tp0", id, 3)
	}); n != 0 {
		t.Fatalf("Partition+Primary+AppendOwners allocate %v times per call", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.Owners("llama3-8b/bf16/16/tp0", id, 3) }); n != 1 {
		t.Fatalf("Owners allocates %v times per call, want 1 (the result)", n)
	}
}
