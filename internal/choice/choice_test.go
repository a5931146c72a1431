package choice

import "testing"

// TestTwoChoicesAvoidsTheLoadedCandidate: the most loaded of n candidates
// is picked only when it is drawn twice, which two distinct draws never do;
// with equal loads every candidate is picked.
func TestTwoChoicesAvoidsTheLoadedCandidate(t *testing.T) {
	loads := []uint32{5, 5, 900, 5}
	seen := map[int]int{}
	for range 2000 {
		seen[TwoChoices(len(loads), func(i int) uint32 { return loads[i] })]++
	}
	if seen[2] != 0 || len(seen) != 3 {
		t.Fatalf("picks %v: want the loaded candidate 2 never, the others all", seen)
	}
	if TwoChoices(1, nil) != 0 {
		t.Fatal("one candidate")
	}
}
