package ring

import (
	"errors"
	"math"
	"testing"

	"github.com/buraksezer/consistent"
)

// TestLibraryPanicsBecomeErrors proves each guard is needed: the raw library panics on the input, and New
// returns the expected error instead.
func TestLibraryPanicsBecomeErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		partitions int
		vnodes     int
		load       float64
		members    int
		want       error
	}{
		// floor(7/2)·1 = 3 per member, 2·3 < 7: "not enough room to distribute partitions".
		{"load 1 with partitions not divisible by members", 7, 20, 1, 2, ErrInvalidConfig},
		{"load below 1", 8, 20, 0.5, 2, ErrInvalidConfig},
		{"NaN load", 8, 20, math.NaN(), 2, ErrInvalidConfig},
		// The search for room looks at all points but one: with one point it looks at none.
		{"one virtual node, one member", 8, 1, 1.25, 1, ErrInvalidConfig},
		{"negative virtual nodes", 8, -1, 1.25, 1, ErrInvalidConfig},
		// floor(3/4) = 0, so the bound is 0 partitions per member.
		{"more members than partitions", 3, 20, 1.25, 4, ErrTooManyMembers},
	} {
		members := testMembers("n", tc.members)
		if !libraryPanics(members, consistent.Config{
			Hasher: libHasher{}, PartitionCount: tc.partitions, ReplicationFactor: tc.vnodes, Load: tc.load,
		}) {
			t.Errorf("%s: the library no longer panics; the guard may be obsolete", tc.name)
		}
		cfg := Config{PartitionCount: tc.partitions, ReplicationFactor: 1, Load: tc.load, VirtualNodes: tc.vnodes, Hasher: HasherXXHash64}
		if _, err := New(members, 1, cfg); !errors.Is(err, tc.want) {
			t.Errorf("%s: New error = %v, want %v", tc.name, err, tc.want)
		}
	}
	// An empty (non-nil) member list panics in the library too; New handles it without the library.
	if !libraryPanics([]Member{}, consistent.Config{Hasher: libHasher{}, PartitionCount: 8, ReplicationFactor: 20, Load: 1.25}) {
		t.Error("the library no longer panics on an empty member list")
	}
	if _, err := New([]Member{}, 1, DefaultConfig()); err != nil {
		t.Errorf("New with no members: %v", err)
	}
}

func libraryPanics(members []Member, cfg consistent.Config) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	lm := make([]consistent.Member, len(members))
	for i, m := range members {
		lm[i] = libMember(m.ID + vnodeSep)
	}
	consistent.New(lm, cfg)
	return false
}

// TestVirtualNodeNamesCannotCollideByConstruction: the library names points member+index, so without a
// separator "n1" (point 10) and "n11" (point 0) would both be "n110".
func TestVirtualNodeNamesCannotCollideByConstruction(t *testing.T) {
	t.Parallel()
	if _, err := New([]Member{{ID: "n1"}, {ID: "n11"}, {ID: "n"}}, 1, DefaultConfig()); err != nil {
		t.Fatal(err)
	}
}

func TestSharedPointsAreReported(t *testing.T) {
	t.Parallel()
	// Two members with the same ID share every point; New rejects duplicates earlier, so call the check directly.
	if _, err := buildVnodes([]Member{{ID: "a"}, {ID: "a"}}, 2); !errors.Is(err, ErrHashCollision) {
		t.Fatalf("buildVnodes error = %v, want ErrHashCollision", err)
	}
}
