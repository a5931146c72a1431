package membership

import (
	"fmt"
	"strconv"

	"github.com/kvring/kvring/ring"
)

// Versioned parts. Each part a node's behaviour towards its peers depends on has a version; a node gossips the
// range of versions it supports (Versions), and every node uses, for each part, the highest version all
// members support (Active). A node of the next release supports the current version too, uses it while any
// member needs it, and the cluster moves on once the last such member is gone: a placement switch is a ring
// change like any other, and the hand-off moves the chunks. Members with no version in common, for any part,
// refuse each other. As CockroachDB's cluster version and Kafka's inter-broker protocol version, but decided by
// gossip alone: neither part persists anything, so the active version steps down again when an older member
// joins (a downgrade), within the ranges the members support.

// Wire protocol versions (Versions.Wire): what nodes may send each other over the Peer service.
const (
	// WireV1 is the Peer service of v0.4.0.
	WireV1 = 1
	// WireV2 rehearses a wire change before a real one needs it: no message differs yet. No release
	// advertises it; tests do, to exercise a switch.
	WireV2 = 2
	// MaxWire is the highest wire version a node may advertise.
	MaxWire = WireV2
)

// Range is a closed range of versions: [Min, Max].
type Range struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// String is "2" or "2-3".
func (r Range) String() string {
	if r.Min == r.Max {
		return strconv.Itoa(r.Min)
	}
	return strconv.Itoa(r.Min) + "-" + strconv.Itoa(r.Max)
}

// Contains reports whether v is in the range.
func (r Range) Contains(v int) bool { return r.Min <= v && v <= r.Max }

func (r Range) overlaps(o Range) bool { return r.Min <= o.Max && o.Min <= r.Max }

// Versions are the ranges of versions a node supports, for each versioned part.
type Versions struct {
	// Placement is the ring's placement algorithm (ring.Config.Placement).
	Placement Range `json:"placement"`
	// Wire is the peer wire protocol (WireV1, ...).
	Wire Range `json:"wire"`
}

// String is "placement 2-3, wire 1".
func (v Versions) String() string {
	return "placement " + v.Placement.String() + ", wire " + v.Wire.String()
}

// DefaultVersions is what this release supports: placement 2, wire 1.
func DefaultVersions() Versions {
	return Versions{Placement: Range{ring.PlacementV2, ring.PlacementV2}, Wire: Range{WireV1, WireV1}}
}

// RehearsalVersions is what a build one version ahead on every part would support: placement 2-3 and wire
// 1-2 (ring.PlacementV3, WireV2). No release advertises it; tests set Config.Versions to it to rehearse a
// switch before a real change needs one.
func RehearsalVersions() Versions {
	return Versions{Placement: Range{ring.PlacementV2, ring.PlacementV3}, Wire: Range{WireV1, WireV2}}
}

// legacyVersions is what a build before v0.4.0 supports: it gossips no versions, places keys with placement
// 2 and speaks wire 1.
func legacyVersions() Versions { return DefaultVersions() }

func (v Versions) validate() error {
	if v.Placement.Min < ring.MinPlacement || v.Placement.Max > ring.MaxPlacement || v.Placement.Min > v.Placement.Max {
		return fmt.Errorf("placement versions %s not within [%d, %d]", v.Placement, ring.MinPlacement, ring.MaxPlacement)
	}
	if v.Wire.Min < WireV1 || v.Wire.Max > MaxWire || v.Wire.Min > v.Wire.Max {
		return fmt.Errorf("wire versions %s not within [%d, %d]", v.Wire, WireV1, MaxWire)
	}
	return nil
}

// overlap reports which part, if any, has no version in common with o ("" when every part has one).
func (v Versions) overlap(o Versions) string {
	switch {
	case !v.Placement.overlaps(o.Placement):
		return "placement"
	case !v.Wire.overlaps(o.Wire):
		return "wire"
	}
	return ""
}

// ActiveVersions are the versions a node uses now: for each part, the highest version every member supports.
type ActiveVersions struct {
	Placement int `json:"placement"`
	Wire      int `json:"wire"`
}

// activeOf is the ActiveVersions of a cluster whose members support all (this node's own range, own, among them).
// conflict is true when some part has no version every member supports (two members that refuse each other
// are both in this node's table): that part then uses the lowest maximum, clamped into own range, and some
// member cannot follow it until the other is gone.
func activeOf(own Versions, all []Versions) (a ActiveVersions, conflict bool) {
	pick := func(get func(Versions) Range) int {
		r := get(own)
		lo, hi := r.Min, r.Max
		for _, v := range all {
			lo, hi = max(lo, get(v).Min), min(hi, get(v).Max)
		}
		if lo > hi {
			conflict = true
			return min(max(hi, r.Min), r.Max)
		}
		return hi
	}
	a.Placement = pick(func(v Versions) Range { return v.Placement })
	a.Wire = pick(func(v Versions) Range { return v.Wire })
	return a, conflict
}
