package ring

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
)

// vnode is one point of a member on the hash circle.
type vnode struct {
	point  uint64
	member int32 // index into the sorted member slice
}

// placement is the output of place: for each partition, its owners in order, as member indices.
type placement struct {
	width  int     // owners stored per partition: min(ReplicationFactor, members)
	owners []int32 // partition p's owners are owners[p*width : (p+1)*width]; owners[p*width] is the primary
	loads  []int   // primary partitions per member index
}

// place assigns partitions to members (sorted by ID, at least one, validated by New). It is one sorted sweep:
// O(M·V·log(M·V) + P·width) for M members, V virtual nodes and P partitions, with no per-partition search.
//
// Partition p sits at point floor(p·2^64/P), so partitions are evenly spaced on the circle and the arc a
// virtual node covers holds a number of partitions proportional to its length, give or take one; a member's
// share then varies only with its arcs (about 1/sqrt(V)), not also with where P hashed points fell.
//
// Primaries are bounded-load consistent hashing, greedy in partition order: partition p goes to the member of
// the first virtual node clockwise from its point (inclusive) whose member is primary for fewer than
// cfg.maxLoad(M) partitions so far. The sweep walks the virtual nodes once in circle order with the lowest
// unassigned partition next: every partition below next is assigned, every partition from next up to the end
// of the current node's arc is waiting for a member with room, and the current node's member takes as many of
// them as it has room for. Partitions past the last virtual node start over at the first one, with the loads
// of the first lap (a second lap, which ends because M·maxLoad >= P). This gives exactly the result of the
// per-partition greedy loop, which python/kvring/ring.py and TestSweepMatchesGreedy spell out.
//
// The other owners come from a walk clockwise along the virtual nodes from the partition's point, skipping
// members already chosen, so the replicas of one member's partitions are spread over many members.
func place(members []Member, cfg Config) (placement, error) {
	vnodes, err := buildVnodes(members, cfg.VirtualNodes, cfg.PlacementVersion())
	if err != nil {
		return placement{}, err
	}
	parts, n := cfg.PartitionCount, len(vnodes)
	width := min(cfg.ReplicationFactor, len(members))
	bound := cfg.maxLoad(len(members))
	pl := placement{width: width, owners: make([]int32, parts*width), loads: make([]int, len(members))}
	// ends[k]: partitions whose point is at or before vnode k's, so vnode k's arc holds [ends[k-1], ends[k]).
	ends := make([]int32, n)
	for k, v := range vnodes {
		ends[k] = int32(partitionsUpTo(v.point, parts))
	}
	next := 0
	for k := 0; next < parts; k++ {
		if k == 2*n {
			return placement{}, fmt.Errorf("BUG: %d members with room for %d partitions each left partition %d without a primary: %w",
				len(members), bound, next, ErrPlacement)
		}
		end := parts // second lap: everything left is waiting
		if k < n {
			end = int(ends[k])
		}
		m := vnodes[k%n].member
		for take := min(bound-pl.loads[m], end-next); take > 0; take-- {
			pl.owners[next*width] = m
			next++
			pl.loads[m]++
		}
	}
	if width == 1 {
		return pl, nil
	}
	k := 0 // the first vnode at or after partition p's point: the first whose arc ends past p
	for p := range parts {
		for k < n && int(ends[k]) <= p {
			k++
		}
		part := pl.owners[p*width : p*width+1]
		for i := 0; len(part) < width; i++ {
			if i == n {
				panic("BUG: ring: replica walk went round the circle without finding enough members")
			}
			if m := vnodes[(k+i)%n].member; !slices.Contains(part, m) {
				part = append(part, m)
			}
		}
	}
	return pl, nil
}

// buildVnodes returns every member's virtual nodes sorted by point, or ErrHashCollision if two share a point.
// A shared point would make the order of the two members on the circle, and so placement, ambiguous.
func buildVnodes(members []Member, perMember, version int) ([]vnode, error) {
	vnodes := make([]vnode, 0, len(members)*perMember)
	for m, mem := range members {
		s := memberSeed(mem.ID, version)
		for range perMember {
			s += vnodeStep
			vnodes = append(vnodes, vnode{point: mix64(s), member: int32(m)})
		}
	}
	vnodes = sortVnodes(vnodes)
	for i := 1; i < len(vnodes); i++ {
		if vnodes[i].point == vnodes[i-1].point {
			a, b := members[vnodes[i-1].member].ID, members[vnodes[i].member].ID
			return nil, fmt.Errorf("members %q and %q share point %#x: %w", a, b, vnodes[i].point, ErrHashCollision)
		}
	}
	return vnodes, nil
}

// sortVnodes returns vs sorted by point. Points are uniform (mixed hashes), so one counting pass by their top
// bits, into about as many buckets as points, leaves buckets of a point or two to sort: O(n) expected where a
// comparison sort of 65,536 points costs ten times as much. A bucket that is large anyway is still sorted in
// O(k log k).
func sortVnodes(vs []vnode) []vnode {
	shift := 64 - bits.Len(uint(len(vs)))
	ends := make([]int32, 1<<(64-shift)) // per bucket: its start, then (after the scatter) its end
	for _, v := range vs {
		if b := v.point >> shift; int(b)+1 < len(ends) {
			ends[b+1]++
		}
	}
	for b := 1; b < len(ends); b++ {
		ends[b] += ends[b-1]
	}
	out := make([]vnode, len(vs))
	for _, v := range vs {
		b := v.point >> shift
		out[ends[b]] = v
		ends[b]++
	}
	start := int32(0)
	for _, end := range ends {
		if end-start > 1 {
			slices.SortFunc(out[start:end], func(a, b vnode) int { return cmp.Compare(a.point, b.point) })
		}
		start = end
	}
	return out
}
