package ring

import (
	"fmt"
	"slices"
	"testing"
)

// TestSpreadSetStartsWithThePrimaryAndHasWidthDistinctMembers: a spread
// set is the key's primary owner, then other members, all distinct, width
// of them (or every member of a smaller ring), the same on every ring built
// from the same members.
func TestSpreadSetStartsWithThePrimaryAndHasWidthDistinctMembers(t *testing.T) {
	members := testMembers("n", 12)
	cfg := DefaultConfig()
	cfg.ReplicationFactor = 3
	r, again := mustNew(t, members, 1, cfg), mustNew(t, slices.Clone(members), 2, cfg)
	short := 0
	for i := range 500 {
		key := testID(fmt.Sprint("group ", i))
		for range 2 {
			set := r.SpreadSet("ns", key, 8)
			if p, _ := r.Primary("ns", key); set[0].ID != p.ID {
				t.Fatalf("key %d: set %v does not start with the primary %s", i, ownerIDs(set), p.ID)
			}
			seen := map[string]bool{}
			for _, m := range set {
				if seen[m.ID] {
					t.Fatalf("key %d: %s twice in %v", i, m.ID, ownerIDs(set))
				}
				seen[m.ID] = true
			}
			if len(set) < 8 {
				short++
			}
			if !slices.Equal(ownerIDs(set), ownerIDs(again.SpreadSet("ns", key, 8))) {
				t.Fatalf("key %d: two rings of the same members give different sets", i)
			}
		}
	}
	if short > 0 {
		t.Fatalf("%d of 1000 sets had fewer than 8 of 12 members", short)
	}
	small := mustNew(t, testMembers("s", 3), 1, cfg)
	if set := small.SpreadSet("ns", testID("x"), 8); len(set) != 3 {
		t.Fatalf("a 3-member ring gives a set of %d, want all 3", len(set))
	}
}

// TestSpreadSetsShareTheLoadOfManyHotGroups: over many keys, every member
// is in about as many spread sets as the others.
func TestSpreadSetsShareTheLoadOfManyHotGroups(t *testing.T) {
	r := mustNew(t, testMembers("n", 16), 1, DefaultConfig())
	count := map[string]int{}
	const keys = 4000
	for i := range keys {
		for _, m := range r.SpreadSet("ns", testID(fmt.Sprint("k", i)), 4) {
			count[m.ID]++
		}
	}
	mean := float64(keys*4) / 16
	for id, n := range count {
		if float64(n) > 1.3*mean || float64(n) < 0.7*mean {
			t.Fatalf("member %s is in %d spread sets, mean %.0f", id, n, mean)
		}
	}
}

// TestSpreadWidthGrowsWithTheRing: 8 members (or every member of a smaller ring) up to 64, then one in 8.
func TestSpreadWidthGrowsWithTheRing(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{-1: 0, 0: 0, 1: 1, 5: 5, 8: 8, 9: 8, 64: 8, 65: 9, 72: 9, 73: 10, 128: 16, 256: 32, 1000: 125} {
		if got := SpreadWidth(n); got != want {
			t.Errorf("SpreadWidth(%d) = %d, want %d", n, got, want)
		}
	}
}
