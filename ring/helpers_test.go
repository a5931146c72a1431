package ring

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"
)

// testID returns a 32-byte chunk id derived from a readable label.
func testID(label string) []byte {
	sum := sha256.Sum256([]byte(label))
	return sum[:]
}

// testMembers returns members prefix0 .. prefix(n-1).
func testMembers(prefix string, n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{ID: fmt.Sprintf("%s%d", prefix, i), Addr: fmt.Sprintf("10.0.0.%d:9600", i)}
	}
	return ms
}

func ownerIDs(ms []Member) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

func mustNew(t testing.TB, members []Member, epoch uint64, cfg Config) *Ring {
	t.Helper()
	r, err := New(members, epoch, cfg)
	if err != nil {
		t.Fatalf("New(%d members): %v", len(members), err)
	}
	return r
}

// checkRing verifies the invariants every ring must satisfy, for every partition.
func checkRing(t testing.TB, r *Ring, members []Member) {
	t.Helper()
	cfg := r.Config()
	ids := make(map[string]bool, len(members))
	for _, m := range members {
		ids[m.ID] = true
	}
	if r.Len() != len(ids) {
		t.Fatalf("Len() = %d, want %d", r.Len(), len(ids))
	}
	want := min(cfg.ReplicationFactor, len(ids))
	for p := range cfg.PartitionCount {
		owners := r.PartitionOwners(p, cfg.ReplicationFactor+1)
		if len(owners) != want {
			t.Fatalf("partition %d: %d owners, want %d", p, len(owners), want)
		}
		seen := make(map[string]bool, len(owners))
		for _, o := range owners {
			if !ids[o.ID] {
				t.Fatalf("partition %d: owner %q is not a member", p, o.ID)
			}
			if seen[o.ID] {
				t.Fatalf("partition %d: owner %q repeated in %v", p, o.ID, ownerIDs(owners))
			}
			seen[o.ID] = true
		}
		for k := 1; k < len(owners); k++ {
			if got := r.PartitionOwners(p, k); !slices.Equal(got, owners[:k]) {
				t.Fatalf("partition %d: first %d owners %v, not a prefix of %v", p, k, ownerIDs(got), ownerIDs(owners))
			}
		}
	}
	total := 0
	for id, load := range r.LoadDistribution() {
		if !ids[id] {
			t.Fatalf("LoadDistribution has non-member %q", id)
		}
		if load > r.MaxLoad() {
			t.Fatalf("member %q is primary for %d partitions, bound is %d", id, load, r.MaxLoad())
		}
		total += load
	}
	if len(ids) > 0 && total != cfg.PartitionCount {
		t.Fatalf("loads sum to %d, want %d", total, cfg.PartitionCount)
	}
}
