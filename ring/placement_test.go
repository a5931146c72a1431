package ring

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestNoMemberExceedsLoadBound: no member is primary for more than max(ceil(P/M), floor(P·Load/M))
// partitions, so the busiest holds at most Load × the mean once members have a few partitions each.
func TestNoMemberExceedsLoadBound(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	for _, n := range []int{1, 2, 3, 4, 5, 7, 10, 16, 32, 64, 128, 256} {
		r := mustNew(t, testMembers("node-", n), 1, cfg)
		avg := float64(cfg.PartitionCount) / float64(n)
		bound := min(cfg.PartitionCount, max(int(math.Ceil(avg)), int(math.Floor(avg*cfg.Load))))
		if r.MaxLoad() != bound {
			t.Errorf("%d members: MaxLoad() = %d, want %d", n, r.MaxLoad(), bound)
		}
		most, least := 0, cfg.PartitionCount
		for id, load := range r.LoadDistribution() {
			if load > bound {
				t.Errorf("%d members: %s is primary for %d partitions, bound %d", n, id, load, bound)
			}
			most, least = max(most, load), min(least, load)
		}
		if skew := float64(most) / avg; skew > cfg.Load {
			t.Errorf("%d members: busiest member holds %.3f× the mean, more than Load %v", n, skew, cfg.Load)
		}
		t.Logf("%3d members: partitions per member %d..%d, ideal %.1f (max/ideal %.3f, bound %d)", n, least, most, avg, float64(most)/avg, bound)
	}
}

// TestJoinAndLeaveMoveLittle: with the default Config, one member joining N moves at most 1.2× the ideal
// share 1/(N+1) of keys, and one of N leaving at most 1.2× the ideal 1/N. Keys are counted for N = 3..10
// (leaving is the same pair of rings in the other order, so it moves exactly as many); partitions for 10
// joiners and 10 leavers (spread over the member list) at each of 8, 16, 64, 128 and 256 members. Run with
// -v for the figures docs/placement.md records.
func TestJoinAndLeaveMoveLittle(t *testing.T) {
	t.Parallel()
	const keys, limit = 100_000, 1.2
	rng := rand.New(rand.NewPCG(42, 7))
	ids := make([][]byte, keys)
	for i := range ids {
		ids[i] = make([]byte, 32)
		for j := 0; j < 32; j += 8 {
			v := rng.Uint64()
			for k := range 8 {
				ids[i][j+k] = byte(v >> (8 * k))
			}
		}
	}
	cfg := DefaultConfig()
	worst := 0.0
	for n := 3; n <= 10; n++ {
		members := testMembers("node-", n+1)
		before := mustNew(t, members[:n], 1, cfg)
		after := mustNew(t, members, 2, cfg)
		moved := 0
		for _, id := range ids {
			a, _ := before.Primary("llama3-8b/bf16/16/tp0", id)
			b, _ := after.Primary("llama3-8b/bf16/16/tp0", id)
			if a.ID != b.ID {
				moved++
			}
		}
		ratio := float64(moved) / keys * float64(n+1)
		partRatio := float64(Moved(before, after)) / float64(cfg.PartitionCount) * float64(n+1)
		t.Logf("%2d → %2d members: moved %5d of %d keys = %.3f× ideal (partitions: %.3f×)", n, n+1, moved, keys, ratio, partRatio)
		if ratio > limit {
			t.Errorf("%d → %d members moved %.3f× the ideal share of keys, limit %v×", n, n+1, ratio, limit)
		}
		worst = max(worst, ratio)
	}
	for _, n := range []int{8, 16, 64, 128, 256} {
		const changes = 10
		members := testMembers("node-", n+changes)
		base := mustNew(t, members[:n], 1, cfg)
		var sum, most [2]float64
		for j := range changes {
			joined := mustNew(t, append(slices.Clone(members[:n]), members[n+j]), 2, cfg)
			left := mustNew(t, slices.Delete(slices.Clone(members[:n]), j*n/changes, j*n/changes+1), 2, cfg)
			for i, c := range []struct {
				what  string
				r     *Ring
				ideal float64
			}{{"join of " + members[n+j].ID, joined, 1 / float64(n+1)}, {"leave of " + members[j*n/changes].ID, left, 1 / float64(n)}} {
				ratio := float64(Moved(base, c.r)) / float64(cfg.PartitionCount) / c.ideal
				if ratio > limit {
					t.Errorf("%d members, %s moved %.3f× the ideal share of partitions, limit %v×", n, c.what, ratio, limit)
				}
				sum[i] += ratio / changes
				most[i] = max(most[i], ratio)
			}
		}
		worst = max(worst, most[0], most[1])
		busiest := slices.Max(slices.Collect(maps.Values(base.LoadDistribution())))
		t.Logf("%3d members: skew %.3f; %d joins move %.3f× ideal on average, at most %.3f×; %d leaves %.3f×, at most %.3f×",
			n, float64(busiest)*float64(n)/float64(cfg.PartitionCount), changes, sum[0], most[0], changes, sum[1], most[1])
	}
	t.Logf("worst: %.3f× ideal", worst)
}

// TestRandomMembershipChangesKeepOwnersValid runs seeded join/leave sequences over small, edge-case configs
// (few partitions, two virtual nodes, member counts up to and past the partition count): New never panics,
// fails only with ErrTooManyMembers and exactly when the members exceed MaxMembers, and every ring it returns
// satisfies the invariants.
func TestRandomMembershipChangesKeepOwnersValid(t *testing.T) {
	t.Parallel()
	for seed := range uint64(12) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 99))
			cfg := Config{
				PartitionCount:    1 + rng.IntN(40),
				ReplicationFactor: 1 + rng.IntN(4),
				Load:              []float64{1 + 1e-9, 1.01, 1.15, 1 + rng.Float64()}[rng.IntN(4)],
				VirtualNodes:      2 + rng.IntN(6),
				Hasher:            HasherXXHash64,
			}
			t.Logf("config %+v", cfg)
			var members []Member
			var prev *Ring
			for step := range 200 {
				if len(members) > 0 && (rng.IntN(2) == 0 || len(members) > cfg.PartitionCount+2) {
					i := rng.IntN(len(members))
					members = slices.Delete(members, i, i+1)
				} else {
					// IDs like "n1" and "n11" on purpose: prefixes of each other.
					id := fmt.Sprintf("n%d", rng.IntN(200))
					if !slices.ContainsFunc(members, func(m Member) bool { return m.ID == id }) {
						members = append(members, Member{ID: id})
					}
				}
				r, err := New(members, uint64(step), cfg)
				if len(members) > cfg.MaxMembers() {
					if !errors.Is(err, ErrTooManyMembers) {
						t.Fatalf("step %d: %d members > MaxMembers %d: err = %v", step, len(members), cfg.MaxMembers(), err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: %d members: %v", step, len(members), err)
				}
				checkRing(t, r, members)
				for k := range 20 {
					owners := r.Owners("ns", testID(fmt.Sprint(k)), cfg.ReplicationFactor)
					if len(members) > 0 && (len(owners) == 0 || owners[0] != r.PartitionOwners(r.Partition("ns", testID(fmt.Sprint(k))), 1)[0]) {
						t.Fatalf("step %d: key %d owners %v disagree with its partition", step, k, ownerIDs(owners))
					}
				}
				if m := Moved(prev, r); m < 0 || m > cfg.PartitionCount {
					t.Fatalf("step %d: Moved = %d", step, m)
				}
				prev = r
			}
		})
	}
}
