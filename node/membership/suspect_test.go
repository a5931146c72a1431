package membership

import (
	"slices"
	"testing"
)

// TestSuspectFollowsGossip: a member whose gossip stops without a goodbye
// (a crash, a partition) is reported suspect by the others, first while
// memberlist suspects it and then once it is declared dead; live members
// and the node itself never are.
func TestSuspectFollowsGossip(t *testing.T) {
	t.Parallel()
	ms := startTestMembers(t, "a", "b", "c")
	a := ms[0]
	for _, id := range []string{"a", "b", "c", "nobody"} {
		if a.Suspect(id) {
			t.Fatalf("a suspects %s in a healthy cluster", id)
		}
	}
	vanish(t, ms[2].Membership)
	waitForMembership(t, "a suspects c", func() bool { return a.Suspect("c") })
	waitForMembership(t, "a declares c dead", func() bool {
		return slices.Equal(aliveMemberIDs(a.Membership), []string{"a", "b"})
	})
	if !a.Suspect("c") || a.Suspect("a") || a.Suspect("b") {
		t.Fatalf("after c was declared dead: suspect a %v, b %v, c %v; want c only", a.Suspect("a"), a.Suspect("b"), a.Suspect("c"))
	}
}
