package placement

import (
	"math"
	"math/rand/v2"
	"slices"
)

// maxOverMean returns max(v)/mean(v), or 0 for an empty or all-zero v.
func maxOverMean[T int64 | int32](v []T) float64 {
	var sum, top T
	for _, x := range v {
		sum += x
		top = max(top, x)
	}
	if sum == 0 {
		return 0
	}
	return float64(top) * float64(len(v)) / float64(sum)
}

// mean returns the mean of v, or 0 when v is empty.
func mean(v []int32) float64 {
	if len(v) == 0 {
		return 0
	}
	var sum int64
	for _, x := range v {
		sum += int64(x)
	}
	return float64(sum) / float64(len(v))
}

// percentile returns the nearest-rank q-quantile of v (0 < q <= 1), or 0 when v is empty. It does not
// modify v.
func percentile(v []int32, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	rank := int(math.Ceil(q*float64(len(s)))) - 1
	return float64(s[min(max(rank, 0), len(s)-1)])
}

// randomSkew is max/mean of per-node calls when request i asks calls[i] nodes drawn uniformly at random
// without replacement (with a fresh draw every n calls), using a PCG seeded with seed.
func randomSkew(calls []int32, n int, seed uint64) float64 {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	load := make([]int64, n)
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	for _, k := range calls {
		for left := int(k); left > 0; left -= n {
			m := min(left, n)
			for j := range m { // partial Fisher-Yates: perm[:m] is a uniform m-subset
				x := j + rng.IntN(n-j)
				perm[j], perm[x] = perm[x], perm[j]
				load[perm[j]]++
			}
		}
	}
	return maxOverMean(load)
}

// mix64 is splitmix64's finaliser: a cheap, well-spread hash of x.
func mix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}
