package moves

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/kvring/kvring/ring"
)

// Range is the partitions Lo to Hi, both included.
type Range struct{ Lo, Hi int }

// Summary is what one node says of the chunks it holds but does not own.
// The zero Summary says "nothing, on ring 0", which no ring hashes to: a
// reader treats it as knowledge missing. Immutable once built.
type Summary struct {
	// Ring is RingHash of the ring the summary was computed against.
	Ring uint64
	// All: the node may hold chunks of any partition (it has not planned
	// since it started, and could not list its catalog). Ranges are then
	// empty.
	All bool
	// AnyRing: Ranges name every partition in which the node holds chunks,
	// whether or not it owns them, so they hold on any ring and Ring is 0
	// (a node that started and has not planned yet: its catalog's chunks,
	// and what it stored since). A partition is a function of the chunk
	// alone, not of the members.
	AnyRing bool
	// Ranges are sorted and disjoint; they may cover more partitions than
	// the node holds chunks of (an encoding that did not fit merged them).
	Ranges []Range
}

// Unknown is the summary of a node that has not planned yet.
func Unknown() Summary { return Summary{All: true} }

// FromCatalog is the AnyRing summary naming parts (any order, repeats
// allowed): every partition in which a node holds chunks.
func FromCatalog(parts []int) Summary {
	s := FromPartitions(0, parts)
	s.AnyRing = true
	return s
}

// Empty reports whether the summary names no partition (and not All).
func (s Summary) Empty() bool { return !s.All && len(s.Ranges) == 0 }

// Contains reports whether the summary names partition p (All names all).
func (s Summary) Contains(p int) bool {
	if s.All {
		return true
	}
	i, _ := slices.BinarySearchFunc(s.Ranges, p, func(r Range, p int) int {
		switch {
		case r.Hi < p:
			return -1
		case r.Lo > p:
			return 1
		}
		return 0
	})
	return i < len(s.Ranges) && s.Ranges[i].Lo <= p && p <= s.Ranges[i].Hi
}

// Partitions counts the partitions the ranges cover.
func (s Summary) Partitions() int {
	n := 0
	for _, r := range s.Ranges {
		n += r.Hi - r.Lo + 1
	}
	return n
}

// Equal reports whether two summaries say the same.
func (s Summary) Equal(o Summary) bool {
	return s.Ring == o.Ring && s.All == o.All && s.AnyRing == o.AnyRing && slices.Equal(s.Ranges, o.Ranges)
}

// FromPartitions is the summary naming parts (any order, repeats allowed)
// against the ring hashed to ringHash.
func FromPartitions(ringHash uint64, parts []int) Summary {
	ps := slices.Clone(parts)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	var rs []Range
	for _, p := range ps {
		if n := len(rs); n > 0 && rs[n-1].Hi+1 == p {
			rs[n-1].Hi = p
			continue
		}
		rs = append(rs, Range{p, p})
	}
	return Summary{Ring: ringHash, Ranges: rs}
}

// RingHash names a ring by what its placement depends on: its settings
// and the IDs of its members. Two nodes with the same members hash their
// rings alike whatever their (local) epochs. Never 0.
func RingHash(r *ring.Ring) uint64 {
	if r == nil {
		return 1
	}
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(r.Config().Fingerprint())
	for _, m := range r.Members() {
		_, _ = d.Write([]byte{0})
		_, _ = d.WriteString(m.ID)
	}
	return max(d.Sum64(), 1)
}

// Encoding (version 0):
//
//	byte 0     flags: bit 0 All, bit 1 AnyRing; bits 4-7 the encoding
//	           version (0). A reader that ignores bit 1 sees ring 0, which
//	           no ring hashes to, and asks the node about every partition.
//	bytes 1-8  Ring, big-endian
//	then       uvarint range count, and per range two uvarints: Lo minus
//	           the previous range's Hi+1 (0 for the first), and Hi minus Lo.
const (
	flagAll      = 1
	flagAnyRing  = 2
	versionShift = 4
	headerLen    = 9
)

// errSummary is a summary that cannot be decoded.
var errSummary = errors.New("moves: summary unreadable")

// AppendEncoded appends the encoding of s to dst in at most budget bytes:
// ranges closest to each other are merged until it fits (it then names more
// partitions than s, never fewer), and All is encoded when even one range
// does not fit.
func (s Summary) AppendEncoded(dst []byte, budget int) []byte {
	rs := s.Ranges
	if !s.All && encodedLen(rs) > budget {
		rs = mergeToFit(rs, budget)
	}
	if s.All || rs == nil && len(s.Ranges) > 0 || encodedLen(rs) > budget {
		return binary.BigEndian.AppendUint64(append(dst, flagAll), s.Ring)
	}
	var flags byte
	if s.AnyRing {
		flags = flagAnyRing
	}
	dst = binary.BigEndian.AppendUint64(append(dst, flags), s.Ring)
	dst = binary.AppendUvarint(dst, uint64(len(rs)))
	next := 0
	for _, r := range rs {
		dst = binary.AppendUvarint(dst, uint64(r.Lo-next))
		dst = binary.AppendUvarint(dst, uint64(r.Hi-r.Lo))
		next = r.Hi + 1
	}
	return dst
}

// encodedLen is the size of the encoding of ranges rs.
func encodedLen(rs []Range) int {
	n := headerLen + uvarintLen(uint64(len(rs)))
	next := 0
	for _, r := range rs {
		n += uvarintLen(uint64(r.Lo-next)) + uvarintLen(uint64(r.Hi-r.Lo))
		next = r.Hi + 1
	}
	return n
}

// mergeToFit merges the ranges separated by the smallest gaps until their
// encoding fits budget; nil when even one range does not.
func mergeToFit(rs []Range, budget int) []Range {
	gaps := make([]int, 0, len(rs))
	for i := 1; i < len(rs); i++ {
		gaps = append(gaps, rs[i].Lo-rs[i-1].Hi)
	}
	slices.Sort(gaps)
	gaps = slices.Compact(gaps)
	// The smallest gap threshold whose merge fits: merging more never grows
	// the encoding, so a binary search finds it.
	i, _ := slices.BinarySearchFunc(gaps, true, func(g int, _ bool) int {
		if encodedLen(mergeGaps(rs, g)) <= budget {
			return 1
		}
		return -1
	})
	if i == len(gaps) {
		whole := []Range{{rs[0].Lo, rs[len(rs)-1].Hi}}
		if encodedLen(whole) > budget {
			return nil
		}
		return whole
	}
	return mergeGaps(rs, gaps[i])
}

// mergeGaps merges the neighbouring ranges of rs at most gap apart.
func mergeGaps(rs []Range, gap int) []Range {
	out := []Range{rs[0]}
	for _, r := range rs[1:] {
		if last := &out[len(out)-1]; r.Lo-last.Hi <= gap {
			last.Hi = r.Hi
			continue
		}
		out = append(out, r)
	}
	return out
}

// Decode parses an encoded summary. What it cannot read (a later version,
// bytes cut short, ranges out of order) decodes as All with an error:
// knowledge that is missing must widen reads, never narrow them.
func Decode(b []byte) (Summary, error) {
	if len(b) < headerLen {
		return Unknown(), fmt.Errorf("%w: %d bytes", errSummary, len(b))
	}
	s := Summary{Ring: binary.BigEndian.Uint64(b[1:headerLen])}
	if v := b[0] >> versionShift; v != 0 {
		return Summary{Ring: s.Ring, All: true}, fmt.Errorf("%w: version %d", errSummary, v)
	}
	if b[0]&flagAll != 0 {
		s.All = true
		return s, nil
	}
	s.AnyRing = b[0]&flagAnyRing != 0
	rest := b[headerLen:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)) {
		return Summary{Ring: s.Ring, All: true}, fmt.Errorf("%w: range count", errSummary)
	}
	rest = rest[k:]
	next := uint64(0)
	s.Ranges = make([]Range, 0, n)
	for range n {
		gap, k1 := binary.Uvarint(rest)
		if k1 <= 0 {
			return Summary{Ring: s.Ring, All: true}, fmt.Errorf("%w: range cut short", errSummary)
		}
		width, k2 := binary.Uvarint(rest[k1:])
		if k2 <= 0 || gap > 1<<31 || width > 1<<31 || next+gap+width > 1<<31 {
			return Summary{Ring: s.Ring, All: true}, fmt.Errorf("%w: range cut short or too large", errSummary)
		}
		rest = rest[k1+k2:]
		lo := next + gap
		s.Ranges = append(s.Ranges, Range{int(lo), int(lo + width)})
		next = lo + width + 1
	}
	return s, nil
}

// uvarintLen is the length of x encoded as a uvarint.
func uvarintLen(x uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], x)
}
