package moves

import (
	"slices"
	"testing"
	"time"

	"github.com/kvring/kvring/ring"
)

// TestASummaryThatDoesNotFitNamesMoreNeverFewer: an encoding cut to its
// budget merges ranges, so that it decodes to a summary naming every
// partition the original named (and some more), within the budget.
func TestASummaryThatDoesNotFitNamesMoreNeverFewer(t *testing.T) {
	var parts []int
	for p := 0; p < 65521; p += 97 {
		parts = append(parts, p, p+1)
	}
	s := FromPartitions(42, parts)
	for _, budget := range []int{400, 100, 20} {
		b := s.AppendEncoded(nil, budget)
		if len(b) > budget {
			t.Fatalf("budget %d: %d bytes", budget, len(b))
		}
		d, err := Decode(b)
		if err != nil || d.Ring != 42 {
			t.Fatalf("budget %d: %+v, %v", budget, d, err)
		}
		for _, p := range parts {
			if !d.Contains(p) {
				t.Fatalf("budget %d: partition %d lost", budget, p)
			}
		}
	}
	if d, _ := Decode(s.AppendEncoded(nil, 1<<20)); !d.Equal(s) {
		t.Fatalf("with room: %+v, want %+v", d, s)
	}
	if d, _ := Decode(s.AppendEncoded(nil, 5)); !d.All {
		t.Fatal("no room even for the header: want All")
	}
}

// TestAnUnreadableSummaryMayHoldAnything: bytes cut short, a later
// version, a range count past the bytes: each decodes as All.
func TestAnUnreadableSummaryMayHoldAnything(t *testing.T) {
	good := FromPartitions(7, []int{3, 900, 901}).AppendEncoded(nil, 100)
	for name, b := range map[string][]byte{
		"empty":     nil,
		"cut":       good[:len(good)-1],
		"version":   append([]byte{1 << versionShift}, good[1:]...),
		"count":     append(slices.Clone(good[:headerLen]), 200),
		"too large": append(slices.Clone(good[:headerLen]), 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0),
	} {
		if s, err := Decode(b); err == nil || !s.All {
			t.Errorf("%s: %+v, %v; want All and an error", name, s, err)
		}
	}
}

// TestACatalogSummaryHoldsOnAnyRing: a summary of what a node's catalog
// holds (AnyRing) survives its encoding, and a reader of an earlier
// release, which does not know the flag, reads it as on a ring it never had
// (so it asks the node about every partition).
func TestACatalogSummaryHoldsOnAnyRing(t *testing.T) {
	s := FromCatalog([]int{900, 3, 901, 3})
	b := s.AppendEncoded(nil, 100)
	d, err := Decode(b)
	if err != nil || !d.Equal(s) || !d.AnyRing || d.Ring != 0 || !d.Contains(3) || d.Contains(4) {
		t.Fatalf("%+v, %v; want %+v", d, err, s)
	}
	old := slices.Clone(b)
	old[0] &^= flagAnyRing
	if d, _ := Decode(old); d.AnyRing || d.Ring != 0 {
		t.Fatalf("without the flag: %+v, want a summary on ring 0", d)
	}
	v := NewView(testRing(t, "a", "b"), func(uint64) *ring.Ring { return nil },
		[]Entry{{Member: ring.Member{ID: "a", Addr: "a:1"}, Summary: &Summary{Ring: 0, Ranges: s.Ranges}}}, time.Time{})
	if v.Movers() != 1 {
		t.Fatal("a summary on ring 0 must be read as a ring never had")
	}
}

func testRing(t *testing.T, ids ...string) *ring.Ring {
	t.Helper()
	var ms []ring.Member
	for _, id := range ids {
		ms = append(ms, ring.Member{ID: id, Addr: id + ":1"})
	}
	r, err := ring.New(ms, 1, ring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAViewNamesOnlyTheMembersThatMayHoldAPartition checks each kind of
// knowledge: a summary on the reader's ring names its partitions; one on a
// ring the reader had names those and the partitions the member owned
// there; one on a ring the reader never had, All, and a member of an
// earlier release that hands off name every partition; one on the reader's
// ring that names nothing, nothing.
func TestAViewNamesOnlyTheMembersThatMayHoldAPartition(t *testing.T) {
	before := testRing(t, "a", "b", "c")
	cur := testRing(t, "a", "b", "c", "d")
	key := []byte("some chunk key")
	p := cur.Partition("ns", key)
	ownerBefore := before.Owners("ns", key, 1)[0].ID
	entry := func(id string, s *Summary, handingOff bool) Entry {
		return Entry{Member: ring.Member{ID: id, Addr: id + ":1"}, Summary: s, HandingOff: handingOff}
	}
	sum := func(r *ring.Ring, parts ...int) *Summary { s := FromPartitions(RingHash(r), parts); return &s }
	catalog := func(parts ...int) *Summary { s := FromCatalog(parts); return &s }
	known := func(h uint64) *ring.Ring {
		if h == RingHash(before) {
			return before
		}
		return nil
	}
	extra := func(entries ...Entry) []string {
		v := NewView(cur, known, entries, time.Time{})
		var out []string
		for _, m := range v.Extra(nil, 0, cur, "ns", key, 1, time.Now()) {
			out = append(out, m.ID)
		}
		slices.Sort(out)
		return out
	}
	for name, c := range map[string]struct {
		entries []Entry
		want    []string
	}{
		"names it":         {[]Entry{entry("a", sum(cur, p), false), entry("b", sum(cur, p+1), false)}, []string{"a"}},
		"nothing":          {[]Entry{entry("a", sum(cur), false), entry("b", sum(cur), false)}, nil},
		"owned before":     {[]Entry{entry(ownerBefore, sum(before), false)}, []string{ownerBefore}},
		"unknown ring":     {[]Entry{entry("c", sum(testRing(t, "x")), false)}, []string{"c"}},
		"restarted":        {[]Entry{entry("d", &Summary{All: true}, false)}, []string{"d"}},
		"old, handing off": {[]Entry{entry("b", nil, true), entry("c", nil, false)}, []string{"b"}},
		"not a member":     {[]Entry{entry("z", &Summary{All: true}, false)}, nil},
		"catalog names it": {[]Entry{entry("a", catalog(p, p+7), false), entry("b", catalog(p+1), false)}, []string{"a"}},
		"catalog is empty": {[]Entry{entry("a", catalog(), false)}, nil},
	} {
		if got := extra(c.entries...); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
	// Not the partition of another member's ranges, nor another member's
	// partitions before.
	var notOwner string
	for _, id := range []string{"a", "b", "c"} {
		if id != ownerBefore {
			notOwner = id
		}
	}
	if got := extra(entry(notOwner, sum(before), false)); got != nil {
		t.Errorf("a member that did not own the partition before is asked: %v", got)
	}
	// A view read with another ring than its own adds every member.
	v := NewView(before, known, nil, time.Time{})
	if got := v.Extra(nil, 0, cur, "ns", key, 1, time.Now()); len(got) != cur.Len() {
		t.Errorf("a view of another ring added %d members, want all %d", len(got), cur.Len())
	}
}
