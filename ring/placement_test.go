package ring

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestNoMemberExceedsLoadBound(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	for _, n := range []int{1, 2, 3, 4, 5, 7, 10, 16, 32, 64} {
		r := mustNew(t, testMembers("node-", n), 1, cfg)
		avg := float64(cfg.PartitionCount) / float64(n)
		bound := int(math.Ceil(avg * cfg.Load))
		most, least := 0, cfg.PartitionCount
		for id, load := range r.LoadDistribution() {
			if load > bound {
				t.Errorf("%d members: %s is primary for %d partitions, bound ceil(%.1f×%v) = %d", n, id, load, avg, cfg.Load, bound)
			}
			most, least = max(most, load), min(least, load)
		}
		t.Logf("%2d members: partitions per member %d..%d, ideal %.1f (max/ideal %.3f, bound %d)", n, least, most, avg, float64(most)/avg, bound)
	}
}

// TestJoinMovesFewKeys: adding one member to N moves at most 1.2× the ideal share 1/(N+1) of keys. Leaving is
// the same pair of rings in the other order, so it moves exactly as many.
func TestJoinMovesFewKeys(t *testing.T) {
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
					// IDs like "n1" and "n11" on purpose: the library would name their points alike.
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
