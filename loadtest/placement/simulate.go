package placement

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
)

// replay is the state of one Simulate call.
type replay struct {
	w *Workload
	c *Cluster
	s Scheme

	held     []bool  // chunk has been stored
	groupKey []int32 // chunk's group key (a chunk index), -1 until stored
	groupIdx []int32 // chunk's group number in its prompt
	hotCount []int32 // lookups per group key (SpreadHot only)

	calls []int64 // lookup calls received, per node
	reads []int64 // chunk reads served, per node
	stamp []int   // stamp[o] == wave id: node o already called in this wave
	wave  int

	perRequest []int32 // lookup calls per request
	roundTrips int64

	sets map[*Cluster]map[int32][]int32 // MembersSpreadSet: a cluster's spread set per group key, when first needed

	bounds []int   // scratch: group boundaries of the current prompt
	chosen []int32 // scratch: node asked for each group of the current prompt
}

// Simulate replays w under scheme s on t.Base and measures the join of every cluster in t.Joins. seed drives
// the access floor's random draws (the replay itself is deterministic). See Result for the metrics.
func Simulate(w *Workload, t *Topology, s Scheme, seed uint64) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, fmt.Errorf("cannot simulate: %w", err)
	}
	if w.Partitions != t.Base.Partitions {
		return Result{}, fmt.Errorf("cannot simulate %q: workload hashed into %d partitions, ring has %d",
			w.Name, w.Partitions, t.Base.Partitions)
	}
	n := len(t.Base.IDs)
	rp := &replay{
		w: w, c: t.Base, s: s,
		held:       make([]bool, len(w.Parts)),
		groupKey:   make([]int32, len(w.Parts)),
		groupIdx:   make([]int32, len(w.Parts)),
		calls:      make([]int64, n),
		reads:      make([]int64, n),
		stamp:      make([]int, n),
		perRequest: make([]int32, len(w.Prompts)),
	}
	for i := range rp.groupKey {
		rp.groupKey[i] = -1
	}
	if s.Spread == SpreadHot {
		rp.hotCount = make([]int32, len(w.Parts))
	}
	for r, prompt := range w.Prompts {
		rp.request(r, prompt)
	}
	return rp.result(t, seed), nil
}

// request replays one prompt: lookup, reads of the held prefix, then store.
func (rp *replay) request(r int, prompt []int32) {
	hit := 0
	for hit < len(prompt) && rp.held[prompt[hit]] {
		hit++
	}
	rp.bounds = rp.s.groupBounds(rp.bounds, len(prompt))
	groups := len(rp.bounds) - 1
	rp.chosen = slices.Grow(rp.chosen[:0], groups)[:groups]

	if !rp.s.EarlyStop {
		rp.askWave(r, prompt, 0, groups)
	} else {
		for g, size := 0, rp.s.FirstWave; g < groups; size *= rp.s.WaveGrowth {
			end := min(g+size, groups)
			rp.askWave(r, prompt, g, end)
			g = end
			if rp.bounds[end] > hit { // a group of this wave is not entirely held: nothing later can hit
				break
			}
		}
	}

	for g := 0; g < groups && rp.bounds[g] < hit; g++ {
		rp.reads[rp.chosen[g]] += int64(min(rp.bounds[g+1], hit) - rp.bounds[g])
	}
	for g := range groups {
		key := prompt[rp.bounds[g]]
		for _, c := range prompt[rp.bounds[g]:rp.bounds[g+1]] {
			if !rp.held[c] {
				rp.held[c] = true
				rp.groupKey[c] = key
				rp.groupIdx[c] = int32(g)
			}
		}
	}
}

// askWave sends one wave: the owners of groups [from, to) of the prompt, one call per distinct node.
func (rp *replay) askWave(r int, prompt []int32, from, to int) {
	rp.wave++
	rp.roundTrips++
	for g := from; g < to; g++ {
		key := prompt[rp.bounds[g]]
		owners := rp.members(rp.c, key, rp.s.replicas(g, rp.isHot(key), len(rp.c.IDs)))
		o := rp.pick(r, key, owners)
		rp.chosen[g] = o
		if rp.stamp[o] != rp.wave {
			rp.stamp[o] = rp.wave
			rp.calls[o]++
			rp.perRequest[r]++
		}
		if rp.hotCount != nil {
			rp.hotCount[key]++
		}
	}
}

func (rp *replay) isHot(key int32) bool {
	return rp.hotCount != nil && int(rp.hotCount[key]) >= rp.s.HotAfter
}

// pick returns the owner request r asks for the group with the given key.
func (rp *replay) pick(r int, key int32, owners []int32) int32 {
	if len(owners) == 1 {
		return owners[0]
	}
	if rp.s.Pick == PickLeastLoaded {
		best := owners[0]
		for _, o := range owners[1:] {
			if rp.calls[o] < rp.calls[best] {
				best = o
			}
		}
		return best
	}
	h := mix64(uint64(r)<<32 ^ uint64(uint32(key)))
	first := owners[h%uint64(len(owners))]
	if rp.s.Pick == PickTwoChoices {
		second := owners[(h%uint64(len(owners))+1+(h>>32)%uint64(len(owners)-1))%uint64(len(owners))]
		if rp.calls[second] < rp.calls[first] {
			return second
		}
	}
	return first
}

// copyOwners returns the owners chunk c is stored on in cluster cl (its group's owners). A spread group is as
// wide as on the base cluster also in a joined one: a join that widens spread sets (GrowWidth) adds copies
// once the group is found hot again, it moves none.
func (rp *replay) copyOwners(cl *Cluster, c int) []int32 {
	key := rp.groupKey[c]
	return rp.members(cl, key, rp.s.replicas(int(rp.groupIdx[c]), rp.isHot(key), len(rp.c.IDs)))
}

// members returns the h members that hold the group with the given key in cluster cl, primary first.
func (rp *replay) members(cl *Cluster, key int32, h int) []int32 {
	if h <= 1 || rp.s.Members == MembersOwners {
		return cl.owners(rp.w.Parts[key], h)
	}
	sets := rp.sets[cl]
	if sets == nil {
		if rp.sets == nil {
			rp.sets = make(map[*Cluster]map[int32][]int32)
		}
		sets = make(map[int32][]int32)
		rp.sets[cl] = sets
	}
	set := sets[key]
	if len(set) >= min(h, len(cl.IDs)) {
		return set[:min(h, len(set))]
	}
	// The same walk as ring.SpreadSet: the primary, then derived keys' primaries, at most 4h tries.
	set = append(set[:0], cl.owners(rp.w.Parts[key], 1)[0])
	for i := uint64(1); len(set) < h && i <= uint64(4*h); i++ {
		p := int32(mix64(uint64(uint32(key))<<24^i) % uint64(cl.Partitions))
		if m := cl.owners(p, 1)[0]; !slices.Contains(set, m) {
			set = append(set, m)
		}
	}
	sets[key] = set
	return set
}

// result computes the Result from the replay's final state.
func (rp *replay) result(t *Topology, seed uint64) Result {
	n := len(t.Base.IDs)
	res := Result{
		Workload: rp.w.Name, Scheme: rp.s.Name, Nodes: n, Requests: len(rp.w.Prompts),
		AskedMean:   mean(rp.perRequest),
		AskedP99:    percentile(rp.perRequest, 0.99),
		AccessSkew:  maxOverMean(rp.calls),
		AccessFloor: randomSkew(rp.perRequest, n, seed),
		ReadSkew:    maxOverMean(rp.reads),
		Joins:       len(t.Joins),
	}
	if len(rp.w.Prompts) > 0 {
		res.RoundTripsMean = float64(rp.roundTrips) / float64(len(rp.w.Prompts))
	}
	stored := make([]int64, n)
	var copies int64
	for c := range rp.groupKey {
		if rp.groupKey[c] < 0 {
			continue
		}
		res.DistinctChunks++
		for _, o := range rp.copyOwners(t.Base, c) {
			stored[o]++
			copies++
		}
	}
	res.StoredSkew = maxOverMean(stored)
	res.StoredFloor = rp.storedFloor(n, seed)
	res.PartitionSkew = t.Base.PartitionSkew()
	if res.DistinctChunks > 0 {
		res.ExtraStored = float64(copies)/float64(res.DistinctChunks) - 1
	}
	ideal := 1 / float64(n+1)
	for _, j := range t.Joins {
		moved := float64(rp.movedCopies(t.Base, j)) / float64(max(copies, 1))
		res.Moved += moved / float64(len(t.Joins))
		res.MovedMaxRatio = max(res.MovedMaxRatio, moved/ideal)
		res.PartitionMovedRatio += float64(j.PartitionsMoved) / float64(j.Partitions) / ideal / float64(len(t.Joins))
	}
	res.MovedRatio = res.Moved / ideal
	return res
}

// movedCopies counts the copies the joined cluster places on a node that did not hold them in base.
func (rp *replay) movedCopies(base, joined *Cluster) int64 {
	toJoined := make([]int32, len(base.IDs)) // base member index -> joined member index
	for i, id := range base.IDs {
		j, ok := slices.BinarySearch(joined.IDs, id)
		if !ok {
			panic("BUG: placement: a joined cluster lost a member of its base")
		}
		toJoined[i] = int32(j)
	}
	var moved int64
	for c := range rp.groupKey {
		if rp.groupKey[c] < 0 {
			continue
		}
		before := rp.copyOwners(base, c)
	next:
		for _, o := range rp.copyOwners(joined, c) {
			for _, b := range before {
				if toJoined[b] == o {
					continue next
				}
			}
			moved++
		}
	}
	return moved
}

// storedFloor is max/mean of stored copies when every group is stored on as many distinct nodes as the scheme
// gives it, drawn uniformly at random from n with a PCG seeded by seed.
func (rp *replay) storedFloor(n int, seed uint64) float64 {
	size := make(map[int32]int64) // group key -> distinct chunks stored under it
	width := make(map[int32]int)  // group key -> copies of each chunk
	for c, key := range rp.groupKey {
		if key >= 0 {
			size[key]++
			width[key] = rp.s.replicas(int(rp.groupIdx[c]), rp.isHot(key), n)
		}
	}
	keys := slices.Sorted(maps.Keys(size)) // a fixed order, so the draws are deterministic
	rng := rand.New(rand.NewPCG(seed, uint64(n)^0x5707ed))
	load := make([]int64, n)
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	for _, key := range keys {
		for j := range min(width[key], n) {
			x := j + rng.IntN(n-j)
			perm[j], perm[x] = perm[x], perm[j]
			load[perm[j]] += size[key]
		}
	}
	return maxOverMean(load)
}
