package ring

import (
	"fmt"
	"testing"
)

// benchIDs returns 256 chunk ids: a 4k-token prompt at 16 tokens per chunk.
func benchIDs() [][]byte {
	ids := make([][]byte, 256)
	for i := range ids {
		ids[i] = testID(fmt.Sprint(i))
	}
	return ids
}

func benchRing(b *testing.B, members, rf int) *Ring {
	cfg := DefaultConfig()
	cfg.ReplicationFactor = rf
	return mustNew(b, testMembers("node-", members), 1, cfg)
}

// BenchmarkOwners resolves the owners of 256 ids per op (one Lookup of a 4k-token prompt).
func BenchmarkOwners(b *testing.B) {
	for _, rf := range []int{1, 3} {
		b.Run(fmt.Sprintf("rf%d", rf), func(b *testing.B) {
			r, ids := benchRing(b, 10, rf), benchIDs()
			b.ReportAllocs()
			for b.Loop() {
				for _, id := range ids {
					_ = r.Owners("llama3-8b/bf16/16/tp0", id, rf)
				}
			}
		})
	}
}

// BenchmarkAppendOwners is BenchmarkOwners with a reused buffer: no allocation at all.
func BenchmarkAppendOwners(b *testing.B) {
	r, ids := benchRing(b, 10, 3), benchIDs()
	buf := make([]Member, 0, 3*len(ids))
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for _, id := range ids {
			buf = r.AppendOwners(buf, "llama3-8b/bf16/16/tp0", id, 3)
		}
	}
}

// BenchmarkNew builds a ring with the default Config (65521 partitions, 256 virtual nodes), the work every
// node and SDK does on each membership change; rf3 also fills the replica walk of 3 owners per partition.
func BenchmarkNew(b *testing.B) {
	for _, rf := range []int{1, 3} {
		for _, n := range []int{3, 16, 64, 128, 256} {
			if rf > 1 && n != 64 && n != 256 {
				continue
			}
			b.Run(fmt.Sprintf("rf%d/members%d", rf, n), func(b *testing.B) {
				members := testMembers("node-", n)
				cfg := DefaultConfig()
				cfg.ReplicationFactor = rf
				b.ReportAllocs()
				for b.Loop() {
					_ = mustNew(b, members, 1, cfg)
				}
			})
		}
	}
}
