package placement

import (
	"errors"
	"fmt"

	"github.com/kvring/kvring/ring"
)

// Spread says which groups are served by several ring owners instead of one.
type Spread int

const (
	// SpreadNone: every group lives on its key's primary and is asked there.
	SpreadNone Spread = iota
	// SpreadLeading: the first Leading groups of every prompt are stored on the key's first Replicas ring
	// owners; a lookup asks one of them (see Pick).
	SpreadLeading
	// SpreadHot: a group becomes hot once it has been looked up HotAfter times (an online counter per group
	// key); from then on it is stored on the key's first Replicas owners and a lookup asks one of them.
	SpreadHot
	// SpreadAll: every group is stored on its key's first Replicas owners (power of d choices for lookups).
	SpreadAll
)

// Members says which members hold a spread group.
type Members int

const (
	// MembersOwners: the key's first Replicas ring owners (its partition's owners, primary first).
	MembersOwners Members = iota
	// MembersSpreadSet: the key's spread set as ring.SpreadSet builds it (what kvring does): the key's primary,
	// then the primaries of keys derived from it, skipping members already in, until the set is wide enough
	// or 4× its width keys were tried. The simulator knows partitions, not ids, so a derived key is a
	// partition drawn by hashing the group key's chunk index with the derivation number.
	MembersSpreadSet
)

// Pick says which of a spread group's owners a lookup asks.
type Pick int

const (
	// PickHash asks owner hash(request, group key) mod Replicas: a fixed, load-blind choice.
	PickHash Pick = iota
	// PickLeastLoaded asks the owner that has received the fewest lookup calls so far (ties to the earlier
	// ring owner). It assumes the client knows the owners' load, an idealisation of power-of-d choices.
	PickLeastLoaded
	// PickTwoChoices draws two distinct owners by hash(request, group key) and asks the one that has
	// received fewer lookup calls so far: power of two choices, with the same idealised knowledge of load.
	PickTwoChoices
)

// Scheme is a candidate placement: how a prompt's chunks are grouped under placement keys, how a lookup walks
// the groups, and which groups are spread over several owners.
type Scheme struct {
	Name string
	// Groups are the group sizes in chunks from the start of a prompt; the last size repeats. {1} places every
	// chunk by its own id (kvring today); {32} puts each 512-token run under the id of its first chunk.
	// Boundaries depend on the position only, so a chunk's group key is a function of the chunk.
	Groups []int
	// EarlyStop makes a lookup ask the groups in order, in waves, and stop after the first wave holding a
	// group that is not entirely held: under the prefix property no later group can extend the hit. Without
	// it a lookup asks the owners of every group at once.
	EarlyStop bool
	// FirstWave is how many groups the first wave asks (EarlyStop only); each next wave asks WaveGrowth
	// times as many. FirstWave 1, WaveGrowth 1 asks one group per round trip.
	FirstWave, WaveGrowth int
	Spread                Spread
	// Leading is the number of leading groups spread by SpreadLeading.
	Leading int
	// HotAfter is the lookup count at which SpreadHot spreads a group.
	HotAfter int
	// Replicas is how many members a spread group lives on (2..MaxReplicas): with GrowWidth, the fewest.
	Replicas int
	// GrowWidth spreads a group over ring.SpreadWidth(N) members on N nodes (at least Replicas), kvring's
	// default; it needs MembersSpreadSet.
	GrowWidth bool
	Members   Members
	Pick      Pick
}

// Validate reports the first setting out of range.
func (s Scheme) Validate() error {
	if len(s.Groups) == 0 {
		return fmt.Errorf("scheme %q: no group sizes", s.Name)
	}
	for _, g := range s.Groups {
		if g < 1 {
			return fmt.Errorf("scheme %q: group size %d is not positive", s.Name, g)
		}
	}
	if s.EarlyStop && (s.FirstWave < 1 || s.WaveGrowth < 1) {
		return fmt.Errorf("scheme %q: waves need FirstWave >= 1 and WaveGrowth >= 1, got %d and %d", s.Name, s.FirstWave, s.WaveGrowth)
	}
	switch s.Spread {
	case SpreadNone:
		return nil
	case SpreadLeading:
		if s.Leading < 1 {
			return fmt.Errorf("scheme %q: SpreadLeading needs Leading >= 1", s.Name)
		}
	case SpreadHot:
		if s.HotAfter < 1 {
			return fmt.Errorf("scheme %q: SpreadHot needs HotAfter >= 1", s.Name)
		}
	case SpreadAll:
	default:
		return fmt.Errorf("scheme %q: unknown spread %d", s.Name, s.Spread)
	}
	if s.Replicas < 2 || s.Replicas > MaxReplicas {
		return fmt.Errorf("scheme %q: replicas %d not in [2, %d]", s.Name, s.Replicas, MaxReplicas)
	}
	if s.Pick != PickHash && s.Pick != PickLeastLoaded && s.Pick != PickTwoChoices {
		return errors.New("scheme " + s.Name + ": unknown pick")
	}
	if s.Members != MembersOwners && s.Members != MembersSpreadSet {
		return fmt.Errorf("scheme %q: unknown members %d", s.Name, s.Members)
	}
	if s.GrowWidth && s.Members != MembersSpreadSet {
		return fmt.Errorf("scheme %q: GrowWidth needs MembersSpreadSet", s.Name)
	}
	return nil
}

// width returns how many members a spread group lives on in a cluster of n nodes.
func (s Scheme) width(n int) int {
	if s.GrowWidth {
		return max(s.Replicas, ring.SpreadWidth(n))
	}
	return s.Replicas
}

// replicas returns how many members group number g (0-based in its prompt) is spread over on n nodes, given
// whether the online counter has marked it hot.
func (s Scheme) replicas(g int, hot bool, n int) int {
	switch s.Spread {
	case SpreadLeading:
		if g < s.Leading {
			return s.width(n)
		}
	case SpreadHot:
		if hot {
			return s.width(n)
		}
	case SpreadAll:
		return s.width(n)
	}
	return 1
}

// groupBounds appends to dst the start of every group of a prompt of n chunks, then n: group i is chunks
// [b[i], b[i+1]).
func (s Scheme) groupBounds(dst []int, n int) []int {
	dst = dst[:0]
	start := 0
	for i := 0; start < n; i++ {
		dst = append(dst, start)
		start += s.Groups[min(i, len(s.Groups)-1)]
	}
	return append(dst, n)
}
