package client

import (
	"testing"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// TestReadsOfASpreadGroupGoToEveryMemberOfItsSpreadSet: once a lookup
// reported a group spread, reads of its ids go to members of its spread set
// picked per call (all of them over many calls, never another member), one
// member per call for all ids of the group; puts still go to the primary;
// the report ends with its time.
func TestReadsOfASpreadGroupGoToEveryMemberOfItsSpreadSet(t *testing.T) {
	rg := testRing(t, "a", "b", "c", "d", "e", "f")
	main := idleConn(t, "127.0.0.1:19000")
	r := &router{}
	r.view.Store(&topology{ring: rg, self: "zz", via: main}) // the connected node is none of them: no main share
	key := testIDs(1)[0]
	id := func(int) []byte { return key }
	primary, _ := rg.Primary("ns", key)
	set := rg.SpreadSet("ns", key, 4)
	inSet := map[string]bool{}
	for _, m := range set {
		inSet[m.ID] = true
	}
	now := time.Now()
	r.hints.learn("ns", []*kvringv1.GroupRun{{Key: key, Count: 3}}, []uint32{4}, now)
	seen := map[string]int{}
	for range 400 {
		shares := r.split(main, "ns", 3, id, true)
		if len(shares) != 1 || len(shares[0].idx) != 3 {
			t.Fatalf("a read of one group split into %+v", shares)
		}
		if !inSet[shares[0].owner.ID] {
			t.Fatalf("read sent to %s, outside the spread set %v", shares[0].owner.ID, set)
		}
		seen[shares[0].owner.ID]++
		if w := r.split(main, "ns", 3, id, false); w[0].owner.ID != primary.ID {
			t.Fatalf("a put went to %s, not the primary %s", w[0].owner.ID, primary.ID)
		}
	}
	if len(seen) != len(set) {
		t.Fatalf("reads reached %v, want every member of %v", seen, set)
	}
	r.hints.learn("ns", []*kvringv1.GroupRun{{Key: key, Count: 3}}, []uint32{0}, now)
	if s := r.split(main, "ns", 3, id, true); s[0].owner.ID != primary.ID {
		t.Fatal("a group reported no longer spread is still read from its spread set")
	}
	r.hints.learn("ns", []*kvringv1.GroupRun{{Key: key, Count: 3}}, []uint32{4}, now.Add(-2*spreadHintTTL))
	if s := r.split(main, "ns", 3, id, true); s[0].owner.ID != primary.ID {
		t.Fatal("an ended report still routes reads")
	}
}
