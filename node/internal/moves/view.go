package moves

import (
	"slices"
	"time"

	"github.com/kvring/kvring/ring"
)

// Entry is what a reader knows of one member: its summary, or, from a node
// of an earlier release that gossips none, only whether it hands off.
type Entry struct {
	Member ring.Member
	// Summary is nil when the member gossips none.
	Summary *Summary
	// HandingOff is the member's "handing off" flag; it decides for a
	// member without a summary.
	HandingOff bool
}

// View is what a reader knows, on one ring, of the members that may hold
// chunks of partitions they do not own. Build with NewView; immutable and
// safe for concurrent use.
type View struct {
	ring   *ring.Ring
	hash   uint64
	movers []mover
	// legacyUntil: until then, a member without a summary is asked about
	// every partition (the settle window after a ring change).
	legacyUntil time.Time
}

// mover is a member whose summary does not say "nothing" on the view's
// ring.
type mover struct {
	m ring.Member
	// how decides whether m may hold chunks of a partition.
	how    moverKind
	s      Summary
	before *ring.Ring // kindBefore: the summary's ring
}

type moverKind uint8

const (
	kindAll    moverKind = iota + 1 // every partition
	kindLegacy                      // every partition while handing off or within the window
	kindRanges                      // the summary's partitions
	kindBefore                      // the summary's partitions and those m owned in before
	kindLegacyHandingOff
)

// NewView builds the view of a reader whose ring is cur from what it knows
// of cur's members (entries of other members are ignored). known returns a
// ring this reader had, by RingHash, or nil. A member without a summary is
// asked about every partition while it hands off or before legacyUntil.
func NewView(cur *ring.Ring, known func(hash uint64) *ring.Ring, entries []Entry, legacyUntil time.Time) *View {
	v := &View{ring: cur, hash: RingHash(cur), legacyUntil: legacyUntil}
	in := map[string]bool{}
	if cur != nil {
		for _, m := range cur.Members() {
			in[m.ID] = true
		}
	}
	for _, e := range entries {
		if !in[e.Member.ID] {
			continue
		}
		mv := mover{m: e.Member}
		switch s := e.Summary; {
		case s == nil && e.HandingOff:
			mv.how = kindLegacyHandingOff
		case s == nil:
			mv.how = kindLegacy
		case s.All:
			mv.how = kindAll
		case s.AnyRing && len(s.Ranges) == 0:
			continue // holds nothing
		case s.AnyRing:
			mv.how, mv.s = kindRanges, *s // partitions do not depend on the ring
		case s.Ring == v.hash && len(s.Ranges) == 0:
			continue // nothing held elsewhere
		case s.Ring == v.hash:
			mv.how, mv.s = kindRanges, *s
		default:
			if mv.before = known(s.Ring); mv.before == nil {
				mv.how = kindAll // a ring this reader never had
			} else {
				mv.how, mv.s = kindBefore, *s
			}
		}
		v.movers = append(v.movers, mv)
	}
	return v
}

// Ring is the ring the view was built on.
func (v *View) Ring() *ring.Ring { return v.ring }

// Movers counts the members that may hold chunks of some partition they do
// not own on the view's ring (0: reads ask owners only).
func (v *View) Movers() int {
	if v == nil {
		return 0
	}
	return len(v.movers)
}

// Extra appends to dst the members of rg, besides those in dst[start:] (a
// chunk's owners), that may hold a chunk of namespace ns placed by key with
// replication r, as of now. A nil view adds nobody. A view built on another
// ring than rg (the ring changed between the two reads of a caller) adds
// every member of rg: what they hold is not known on rg.
func (v *View) Extra(dst []ring.Member, start int, rg *ring.Ring, ns string, key []byte, r int, now time.Time) []ring.Member {
	if v == nil || len(v.movers) == 0 && rg == v.ring {
		return dst
	}
	if rg != v.ring && (rg == nil || RingHash(rg) != v.hash) {
		for _, m := range rg.Members() {
			dst = appendNew(dst, start, m)
		}
		return dst
	}
	p := rg.Partition(ns, key)
	for i := range v.movers {
		if mv := &v.movers[i]; mv.mayHold(p, r, now, v.legacyUntil) {
			dst = appendNew(dst, start, mv.m)
		}
	}
	return dst
}

// mayHold reports whether the mover may hold chunks of partition p (placed
// with replication r) now.
func (mv *mover) mayHold(p, r int, now, legacyUntil time.Time) bool {
	switch mv.how {
	case kindRanges:
		return mv.s.Contains(p)
	case kindBefore:
		return mv.s.Contains(p) || slices.ContainsFunc(mv.before.PartitionOwners(p, r), func(o ring.Member) bool { return o.ID == mv.m.ID })
	case kindLegacy:
		return now.Before(legacyUntil)
	}
	return true // kindAll, kindLegacyHandingOff
}

// appendNew appends m to dst unless dst[start:] lists it.
func appendNew(dst []ring.Member, start int, m ring.Member) []ring.Member {
	if slices.ContainsFunc(dst[start:], func(o ring.Member) bool { return o.ID == m.ID }) {
		return dst
	}
	return append(dst, m)
}
