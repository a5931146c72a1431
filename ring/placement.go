package ring

import (
	"fmt"
	"slices"
	"sort"

	"github.com/buraksezer/consistent"
)

// libMember is a member as the ring library sees it: its name is the member ID followed by vnodeSep.
type libMember string

func (m libMember) String() string { return string(m) }

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

// place assigns partitions to members (sorted by ID, at least one, validated by New).
//
// The primary of each partition comes from the ring library (consistent hashing with bounded loads). The
// other owners come from a walk clockwise along the virtual nodes from the partition's point, skipping members
// already chosen. The library's GetClosestN is not used: it orders replicas by a hash of member names alone, so
// every partition of a member would share the same second owner, which would take all its load when it fails.
func place(members []Member, cfg Config) (placement, error) {
	vnodes, err := buildVnodes(members, cfg.VirtualNodes)
	if err != nil {
		return placement{}, err
	}
	primaries, err := libPrimaries(members, cfg)
	if err != nil {
		return placement{}, err
	}
	pl := placement{
		width:  min(cfg.ReplicationFactor, len(members)),
		owners: make([]int32, 0, cfg.PartitionCount*min(cfg.ReplicationFactor, len(members))),
		loads:  make([]int, len(members)),
	}
	for p, primary := range primaries {
		pl.loads[primary]++
		pl.owners = append(pl.owners, primary)
		if pl.width == 1 {
			continue
		}
		part := pl.owners[p*pl.width : p*pl.width+1]
		point := partitionPoint(p)
		i := sort.Search(len(vnodes), func(i int) bool { return vnodes[i].point >= point })
		for n := 0; len(part) < pl.width; n++ {
			if n == len(vnodes) {
				panic("BUG: ring: replica walk went round the circle without finding enough members")
			}
			m := vnodes[(i+n)%len(vnodes)].member
			if !slices.Contains(part, m) {
				part = append(part, m)
			}
		}
		pl.owners = pl.owners[:(p+1)*pl.width]
	}
	return pl, nil
}

// buildVnodes returns every member's virtual nodes sorted by point, or ErrHashCollision if two share a point.
// A shared point would make the library's placement depend on insertion order and could hide a member.
func buildVnodes(members []Member, perMember int) ([]vnode, error) {
	vnodes := make([]vnode, 0, len(members)*perMember)
	for m, mem := range members {
		for i := range perMember {
			vnodes = append(vnodes, vnode{point: vnodePoint(mem.ID, i), member: int32(m)})
		}
	}
	slices.SortFunc(vnodes, func(a, b vnode) int {
		switch {
		case a.point < b.point:
			return -1
		case a.point > b.point:
			return 1
		}
		return 0
	})
	for i := 1; i < len(vnodes); i++ {
		if vnodes[i].point == vnodes[i-1].point {
			a, b := members[vnodes[i-1].member].ID, members[vnodes[i].member].ID
			return nil, fmt.Errorf("members %q and %q share point %#x: %w", a, b, vnodes[i].point, ErrHashCollision)
		}
	}
	return vnodes, nil
}

// libPrimaries runs the ring library and returns each partition's primary as a member index. New has
// already ruled out every input known to make the library panic; the recover turns an unknown one into an
// error, because member lists come from peers and a bad one must not crash the node.
func libPrimaries(members []Member, cfg Config) (primaries []int32, err error) {
	defer func() {
		if r := recover(); r != nil {
			primaries, err = nil, fmt.Errorf("BUG: ring library panicked on %d members: %v: %w", len(members), r, ErrPlacement)
		}
	}()
	libMembers := make([]consistent.Member, len(members))
	index := make(map[string]int32, len(members))
	for i, m := range members {
		name := m.ID + vnodeSep
		libMembers[i] = libMember(name)
		index[name] = int32(i)
	}
	c := consistent.New(libMembers, consistent.Config{
		Hasher:            libHasher{},
		PartitionCount:    cfg.PartitionCount,
		ReplicationFactor: cfg.VirtualNodes,
		Load:              cfg.Load,
	})
	primaries = make([]int32, cfg.PartitionCount)
	for p := range primaries {
		owner := c.GetPartitionOwner(p)
		if owner == nil {
			return nil, fmt.Errorf("BUG: ring library left partition %d without owner: %w", p, ErrPlacement)
		}
		i, ok := index[owner.String()]
		if !ok {
			return nil, fmt.Errorf("BUG: ring library returned unknown member %q: %w", owner.String(), ErrPlacement)
		}
		primaries[p] = i
	}
	return primaries, nil
}
