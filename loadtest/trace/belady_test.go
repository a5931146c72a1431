package trace

import (
	"math/rand/v2"
	"testing"
)

func oneRequest(ids ...int64) []Request {
	return []Request{{InputLength: len(ids) * BlockTokens, HashIDs: ids}}
}

func TestBeladyHandWrittenSequence(t *testing.T) {
	t.Parallel()
	// Capacity 2 on 1 2 3 1 2 3 1, admitting every miss:
	// 1m 2m [1 2]; 3m evicts 2 (next use 4, after 1's 3) [1 3]; 1h;
	// 2m evicts 1 (next use 6, after 3's 5) [2 3]; 3h; 1m. Two hits.
	reqs := oneRequest(1, 2, 3, 1, 2, 3, 1)
	if got, want := BeladyAdmitAll(reqs, 2), 2.0/7; got != want {
		t.Errorf("BeladyAdmitAll = %v, want %v", got, want)
	}
	// With bypass, 3 is never admitted (its next use is always the farthest):
	// 1m 2m 3m 1h 2h 3m 1h. Three hits.
	if got, want := Belady(reqs, 2), 3.0/7; got != want {
		t.Errorf("Belady = %v, want %v", got, want)
	}
	if got := Belady(reqs, 0); got != 0 {
		t.Errorf("Belady capacity 0 = %v", got)
	}
	if got := Belady(nil, 2); got != 0 {
		t.Errorf("Belady(nil) = %v", got)
	}
}

// exhaustiveOptimum tries every eviction (and, with bypass, every refusal) on a short
// sequence over ids 0..7 and returns the best number of hits.
func exhaustiveOptimum(ids []int64, capacity int, bypass bool) int {
	type state struct {
		pos  int
		held uint8
	}
	memo := map[state]int{}
	var best func(pos int, held uint8) int
	best = func(pos int, held uint8) int {
		if pos == len(ids) {
			return 0
		}
		s := state{pos, held}
		if v, ok := memo[s]; ok {
			return v
		}
		bit := uint8(1) << ids[pos]
		var v int
		switch {
		case held&bit != 0:
			v = 1 + best(pos+1, held)
		case popcount(held) < capacity:
			v = best(pos+1, held|bit)
			if bypass {
				v = max(v, best(pos+1, held))
			}
		default:
			v = -1
			if bypass {
				v = best(pos+1, held)
			}
			for victim := uint8(1); victim != 0; victim <<= 1 {
				if held&victim != 0 {
					v = max(v, best(pos+1, held&^victim|bit))
				}
			}
		}
		memo[s] = v
		return v
	}
	return best(0, 0)
}

func popcount(x uint8) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

func TestBeladyIsTheExhaustiveOptimum(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		ids := make([]int64, 4+rng.IntN(14))
		for i := range ids {
			ids[i] = int64(rng.IntN(6))
		}
		capacity := 1 + rng.IntN(3)
		reqs := oneRequest(ids...)
		for _, bypass := range []bool{true, false} {
			got, _ := beladyHits(reqs, capacity, bypass)
			if want := exhaustiveOptimum(ids, capacity, bypass); got != want {
				t.Fatalf("trial %d: ids %v capacity %d bypass %v: %d hits, optimum %d",
					trial, ids, capacity, bypass, got, want)
			}
		}
	}
}

func BenchmarkBeladySyntheticTrace(b *testing.B) {
	reqs, err := syntheticTrace()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		Belady(reqs, 4392)
	}
}
