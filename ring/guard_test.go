package ring

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestUnplaceableInputsAreErrors: settings and member lists that cannot be placed are errors from New, never
// panics.
func TestUnplaceableInputsAreErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		partitions int
		vnodes     int
		load       float64
		members    int
		want       error
	}{
		{"load 1", 7, 20, 1, 2, ErrInvalidConfig},
		{"load below 1", 8, 20, 0.5, 2, ErrInvalidConfig},
		{"NaN load", 8, 20, math.NaN(), 2, ErrInvalidConfig},
		{"one virtual node", 8, 1, 1.25, 1, ErrInvalidConfig},
		{"negative virtual nodes", 8, -1, 1.25, 1, ErrInvalidConfig},
		{"more members than partitions", 3, 20, 1.25, 4, ErrTooManyMembers},
	} {
		cfg := Config{PartitionCount: tc.partitions, ReplicationFactor: 1, Load: tc.load, VirtualNodes: tc.vnodes, Hasher: HasherXXHash64}
		if _, err := New(testMembers("n", tc.members), 1, cfg); !errors.Is(err, tc.want) {
			t.Errorf("%s: New error = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := New([]Member{}, 1, DefaultConfig()); err != nil {
		t.Errorf("New with no members: %v", err)
	}
}

// TestPrefixIDsAreDistinctMembers: IDs that are prefixes of each other ("n1", "n11") get unrelated points.
func TestPrefixIDsAreDistinctMembers(t *testing.T) {
	t.Parallel()
	r, err := New([]Member{{ID: "n1"}, {ID: "n11"}, {ID: "n"}, {ID: "n110"}}, 1, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for id, load := range r.LoadDistribution() {
		if load < r.Config().PartitionCount/8 {
			t.Errorf("%s is primary for only %d of %d partitions", id, load, r.Config().PartitionCount)
		}
	}
}

func TestSharedPointsAreReported(t *testing.T) {
	t.Parallel()
	// Two members with the same ID share every point; New rejects duplicates earlier, so call the check directly.
	if _, err := buildVnodes([]Member{{ID: "a"}, {ID: "a"}}, 2, PlacementV2); !errors.Is(err, ErrHashCollision) {
		t.Fatalf("buildVnodes error = %v, want ErrHashCollision", err)
	}
}

// greedyPrimaries is the reference place's sweep must match: bounded-load consistent hashing spelled out
// partition by partition. Partition p, at point floor(p·2^64/P), goes to the member of the first virtual node
// at or after that point (wrapping around) whose member has fewer than maxLoad partitions so far.
func greedyPrimaries(members []Member, cfg Config) []int32 {
	vnodes, err := buildVnodes(members, cfg.VirtualNodes, cfg.PlacementVersion())
	if err != nil {
		panic(err)
	}
	bound := cfg.maxLoad(len(members))
	loads := make([]int, len(members))
	out := make([]int32, cfg.PartitionCount)
	for p := range cfg.PartitionCount {
		point := pointOf(p, cfg.PartitionCount)
		k, _ := slices.BinarySearchFunc(vnodes, point, func(v vnode, pt uint64) int {
			switch {
			case v.point < pt:
				return -1
			case v.point > pt:
				return 1
			}
			return 0
		})
		for i := range len(vnodes) {
			m := vnodes[(k+i)%len(vnodes)].member
			if loads[m] < bound {
				loads[m]++
				out[p] = m
				break
			}
			if i == len(vnodes)-1 {
				panic("no member with room")
			}
		}
	}
	return out
}

// TestSweepMatchesGreedy checks place's one-pass sweep against the partition-by-partition reference, on
// seeded random configs that make the bound bite (few partitions, tight loads, few points) and on the default.
func TestSweepMatchesGreedy(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	type tc struct {
		cfg Config
		n   int
	}
	cases := []tc{{DefaultConfig(), 3}, {DefaultConfig(), 64}}
	for range 60 {
		parts := 1 + rng.IntN(300)
		cases = append(cases, tc{Config{
			PartitionCount:    parts,
			ReplicationFactor: 1,
			Load:              []float64{1 + 1e-9, 1.01, 1.15, 1 + 2*rng.Float64()}[rng.IntN(4)],
			VirtualNodes:      2 + rng.IntN(20),
			Hasher:            HasherXXHash64,
		}, 1 + rng.IntN(min(parts, 40))})
	}
	for _, c := range cases {
		members := testMembers("m", c.n)
		r := mustNew(t, members, 1, c.cfg)
		want := greedyPrimaries(r.members, c.cfg)
		for p, m := range want {
			if got := r.pl.owners[p*r.pl.width]; got != m {
				t.Fatalf("%+v, %d members: partition %d: sweep gives member %d, greedy %d", c.cfg, c.n, p, got, m)
			}
		}
	}
}

func TestPartitionsUpTo(t *testing.T) {
	t.Parallel()
	for _, parts := range []int{1, 2, 3, 7, 4099, 65521, 65536} {
		for _, v := range []uint64{0, 1, 1 << 40, 1<<63 - 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64} {
			// Reference: count partitions p with floor(p·2^64/P) <= v by binary search on p.
			lo, hi := 0, parts // answer in [lo, hi]
			for lo < hi {
				mid := (lo + hi + 1) / 2 // is partition mid-1 at or before v?
				if pointOf(mid-1, parts) <= v {
					lo = mid
				} else {
					hi = mid - 1
				}
			}
			if got := partitionsUpTo(v, parts); got != lo {
				t.Errorf("partitionsUpTo(%#x, %d) = %d, want %d", v, parts, got, lo)
			}
		}
	}
}

// pointOf is floor(p·2^64/parts) by long division.
func pointOf(p, parts int) uint64 {
	point, rem := uint64(0), uint64(p)
	for range 64 {
		point <<= 1
		rem <<= 1
		if rem >= uint64(parts) {
			rem -= uint64(parts)
			point |= 1
		}
	}
	return point
}
