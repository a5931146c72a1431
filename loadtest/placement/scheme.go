package placement

import (
	"errors"
	"fmt"
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
	// Replicas is how many ring owners a spread group lives on (2..MaxReplicas).
	Replicas int
	Pick     Pick
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
	return nil
}

// replicas returns how many owners group number g (0-based in its prompt) is spread over, given whether the
// online counter has marked it hot.
func (s Scheme) replicas(g int, hot bool) int {
	switch s.Spread {
	case SpreadLeading:
		if g < s.Leading {
			return s.Replicas
		}
	case SpreadHot:
		if hot {
			return s.Replicas
		}
	case SpreadAll:
		return s.Replicas
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
