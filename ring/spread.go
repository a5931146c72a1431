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
