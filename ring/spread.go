package ring

import "encoding/binary"

// SpreadSet returns the members that hold a group spread to width members
// because it is hot: the primary owner of key, then the primaries of keys
// derived from key (its last four bytes XORed with 1, 2, 3, ...), skipping
// members already in the set, until it has width members or 4×width keys
// were tried. Every node and client computes the same set from the same
// ring (it depends on neither the ring's nor the namespace's replication
// factor), and like any placement it moves little when a member joins or
// leaves. It returns at most min(width, Len()) members, the primary first;
// nil for an empty ring. key must be at least 4 bytes.
func (r *Ring) SpreadSet(namespace string, key []byte, width int) []Member {
	width = min(width, len(r.members))
	if width <= 0 {
		return nil
	}
	set := []Member{r.primary(r.Partition(namespace, key))}
	if len(key) < 4 {
		return set
	}
	derived := make([]byte, len(key))
	copy(derived, key)
	tail := binary.LittleEndian.Uint32(key[len(key)-4:])
	for i := uint32(1); len(set) < width && int(i) <= 4*width; i++ {
		binary.LittleEndian.PutUint32(derived[len(derived)-4:], tail^i)
		m := r.primary(r.Partition(namespace, derived))
		if !containsID(set, m.ID) {
			set = append(set, m)
		}
	}
	return set
}

func containsID(ms []Member, id string) bool {
	for _, m := range ms {
		if m.ID == id {
			return true
		}
	}
	return false
}

// Spread widths. See SpreadWidth.
const (
	// MinSpreadWidth is the spread width of a hot group on rings of up to 8·MinSpreadWidth members.
	MinSpreadWidth = 8
	// SpreadNodesPerMember is how many ring members there are per member of a spread set on larger rings.
	SpreadNodesPerMember = 8
)

// SpreadWidth returns how many members should hold a hot group on a ring of n members: MinSpreadWidth, or
// one member in SpreadNodesPerMember (rounded up) once that is more, and never more than n; 0 for n <= 0.
// It depends on n alone, so every node and client agrees on it for the same ring.
//
// Why it grows with the ring: a group asked by a share h of all lookups, spread over w members, gives each
// of them about h/w of the lookups on top of its share of the rest, while the mean node sees A/n of them
// (A: nodes a lookup asks). The busiest member's load is then about 1 + h·n/(w·A) times the mean: with a
// fixed w it grows with the cluster (a prompt that starts 30 % of requests, spread over 8 of 256 nodes,
// made its members 2.2× as busy as the mean in the simulator), with w = n/8 it stays at 1 + 8h/A whatever
// n. The cost, extra copies of each hot group, stays the same fraction of the cluster's memory.
func SpreadWidth(n int) int {
	if n <= 0 {
		return 0
	}
	return min(n, max(MinSpreadWidth, (n+SpreadNodesPerMember-1)/SpreadNodesPerMember))
}
