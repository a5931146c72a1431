package ring

import (
	"cmp"
	"fmt"
	"slices"
)

// Member is a node of the ring.
type Member struct {
	// ID is the node's stable identity; placement depends on it alone.
	ID string
	// Addr is the node's gRPC address, carried for the caller's convenience; it does not affect placement.
	Addr string
}

// Ring is an immutable placement snapshot: (namespace, id) → partition → ordered owners. It is safe for
// concurrent use; no method blocks or allocates beyond the slice or map it returns.
type Ring struct {
	epoch   uint64
	cfg     Config
	members []Member // sorted by ID
	pl      placement
}

// New builds the ring of members at the given epoch. The result depends only on the set of member IDs and
// cfg, not on the order of members. It returns an error wrapping ErrInvalidConfig, ErrInvalidMember (empty
// or duplicate ID), ErrTooManyMembers, ErrHashCollision or ErrPlacement instead of panicking. Zero members is
// allowed: the ring then has no owners (see ErrNoMembers). New does no I/O; its work is one sort of
// members × VirtualNodes points and one pass over the partitions (with the default Config a few
// milliseconds at 256 members: BenchmarkNew), so build rings off the lookup path and swap them in.
func New(members []Member, epoch uint64, cfg Config) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot build ring: %w", err)
	}
	sorted := slices.Clone(members)
	slices.SortFunc(sorted, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	for i, m := range sorted {
		if m.ID == "" {
			return nil, fmt.Errorf("cannot build ring: member with address %q has an empty ID: %w", m.Addr, ErrInvalidMember)
		}
		if i > 0 && sorted[i-1].ID == m.ID {
			return nil, fmt.Errorf("cannot build ring: duplicate member ID %q: %w", m.ID, ErrInvalidMember)
		}
	}
	if !cfg.fits(len(sorted)) {
		return nil, fmt.Errorf("cannot build ring: %d members cannot share %d partitions (at most %d members): %w",
			len(sorted), cfg.PartitionCount, cfg.MaxMembers(), ErrTooManyMembers)
	}
	r := &Ring{epoch: epoch, cfg: cfg, members: sorted}
	if len(sorted) == 0 {
		return r, nil
	}
	pl, err := place(sorted, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot build ring: %w", err)
	}
	r.pl = pl
	return r, nil
}

// Epoch returns the epoch the ring was built with.
func (r *Ring) Epoch() uint64 { return r.epoch }

// Config returns the settings the ring was built with.
func (r *Ring) Config() Config { return r.cfg }

// Len returns the number of members.
func (r *Ring) Len() int { return len(r.members) }

// Members returns a copy of the members, sorted by ID.
func (r *Ring) Members() []Member { return slices.Clone(r.members) }

// Partition returns the partition of a chunk key, in [0, PartitionCount). It does not allocate.
func (r *Ring) Partition(namespace string, id []byte) int {
	return int(keyHash(namespace, id) % uint64(r.cfg.PartitionCount))
}

// Owners returns the first n owners of the chunk's partition, primary first; see PartitionOwners.
func (r *Ring) Owners(namespace string, id []byte, n int) []Member {
	return r.PartitionOwners(r.Partition(namespace, id), n)
}

// AppendOwners appends the first n owners of the chunk's partition to dst and returns the extended slice, so a
// caller resolving many ids can reuse one buffer.
func (r *Ring) AppendOwners(dst []Member, namespace string, id []byte, n int) []Member {
	return r.appendPartitionOwners(dst, r.Partition(namespace, id), n)
}

// PartitionOwners returns the first n owners of partition partID: the primary (the bounded-load owner), then
// distinct members in ring order. n is capped at min(ReplicationFactor, Len()); for every k, the first k
// owners are the same whatever n is. It returns nil if the ring has no members, n <= 0 or partID is out of
// range.
func (r *Ring) PartitionOwners(partID int, n int) []Member {
	n = r.ownerCount(partID, n)
	if n == 0 {
		return nil
	}
	return r.appendPartitionOwners(make([]Member, 0, n), partID, n)
}

func (r *Ring) appendPartitionOwners(dst []Member, partID int, n int) []Member {
	n = r.ownerCount(partID, n)
	for _, m := range r.pl.owners[partID*r.pl.width : partID*r.pl.width+n] {
		dst = append(dst, r.members[m])
	}
	return dst
}

// ownerCount is how many owners PartitionOwners returns; 0 when there are none.
func (r *Ring) ownerCount(partID int, n int) int {
	if partID < 0 || partID >= r.cfg.PartitionCount || n <= 0 {
		return 0
	}
	return min(n, r.pl.width)
}

// Primary returns the primary owner of the chunk's partition, or ErrNoMembers. It does not allocate.
func (r *Ring) Primary(namespace string, id []byte) (Member, error) {
	if len(r.members) == 0 {
		return Member{}, ErrNoMembers
	}
	return r.primary(r.Partition(namespace, id)), nil
}

// primary returns partition p's primary; the ring must have members.
func (r *Ring) primary(p int) Member { return r.members[r.pl.owners[p*r.pl.width]] }

// LoadDistribution returns, for each member ID, the number of partitions it is primary for. The counts sum to
// PartitionCount (or the map is empty when there are no members) and none exceeds MaxLoad.
func (r *Ring) LoadDistribution() map[string]int {
	d := make(map[string]int, len(r.members))
	for i, m := range r.members {
		d[m.ID] = r.pl.loads[i]
	}
	return d
}

// MaxLoad returns the most partitions any member may be primary for: max(ceil(P/M), floor(P × Load / M)),
// or 0 with no members.
func (r *Ring) MaxLoad() int { return r.cfg.maxLoad(len(r.members)) }

// Moved returns the number of partitions whose primary differs (by member ID) between two rings, in either
// order. A partition that has a primary in one ring only counts as moved; a nil ring counts as empty. If the
// rings have different partition counts their partitions are unrelated and every partition counts as moved.
func Moved(before, after *Ring) int {
	if before == nil || after == nil {
		r := cmp.Or(before, after)
		if r == nil || r.Len() == 0 {
			return 0
		}
		return r.cfg.PartitionCount
	}
	if before.cfg.PartitionCount != after.cfg.PartitionCount {
		return max(before.cfg.PartitionCount, after.cfg.PartitionCount)
	}
	if before.Len() == 0 || after.Len() == 0 {
		if before.Len() == 0 && after.Len() == 0 {
			return 0
		}
		return before.cfg.PartitionCount
	}
	moved := 0
	for p := range before.cfg.PartitionCount {
		if before.primary(p).ID != after.primary(p).ID {
			moved++
		}
	}
	return moved
}
