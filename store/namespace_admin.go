package store

import (
	"fmt"
	"sort"
)

// NamespaceUsage is what the store holds of one namespace.
type NamespaceUsage struct {
	Namespace    string `json:"namespace"`
	Chunks       int64  `json:"chunks"`
	PayloadBytes int64  `json:"payload_bytes"`
	// SlotBytes is the memory its chunks take (payload plus allocator
	// waste): what dropping the namespace frees.
	SlotBytes int64 `json:"slot_bytes"`
	Pinned    int64 `json:"pinned_chunks"`
	// DiskChunks and DiskBytes (payload) are what the Lower tier holds of
	// the namespace, chunks also in shared memory included. Chunks and
	// PayloadBytes count a chunk held by both tiers once.
	DiskChunks int64 `json:"disk_chunks,omitempty"`
	DiskBytes  int64 `json:"disk_bytes,omitempty"`
}

// Namespaces returns the usage of every namespace holding chunks in shared
// memory or the Lower tier, sorted by name. It walks the index under the
// store's mutex, and the tier's (an admin call, not a data path).
func (s *Store) Namespaces() []NamespaceUsage {
	if !s.enter() {
		return nil
	}
	defer s.exit()
	s.mu.Lock()
	both := map[uint32]NamespaceUsage{} // in shared memory and the Lower tier
	by := map[uint32]*NamespaceUsage{}
	for _, head := range s.idx.m {
		for e := head; e != nil; e = e.next {
			if e.state != stateSealed {
				continue
			}
			u := by[e.key.ns]
			if u == nil {
				u = &NamespaceUsage{Namespace: s.nsNames[e.key.ns]}
				by[e.key.ns] = u
			}
			u.Chunks++
			u.PayloadBytes += int64(e.size)
			u.SlotBytes += e.slot.seg.slotSize
			if e.pins > 0 {
				u.Pinned++
			}
			if s.lowerContains(u.Namespace, e.key.id) {
				b := both[e.key.ns]
				b.Chunks++
				b.PayloadBytes += int64(e.size)
				both[e.key.ns] = b
			}
		}
	}
	names := make(map[string]uint32, len(by))
	for id, u := range by {
		names[u.Namespace] = id
	}
	s.mu.Unlock()
	out := make([]NamespaceUsage, 0, len(by))
	for _, u := range by {
		out = append(out, *u)
	}
	out = s.addLowerUsage(out, names, both)
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

// addLowerUsage adds the Lower tier's chunks to the shared memory's usage
// out (names: its namespaces' ids; both: per namespace id, what both tiers
// hold, counted once).
func (s *Store) addLowerUsage(out []NamespaceUsage, names map[string]uint32, both map[uint32]NamespaceUsage) []NamespaceUsage {
	if s.cfg.Lower == nil {
		return out
	}
	at := make(map[string]int, len(out))
	for i, u := range out {
		at[u.Namespace] = i
	}
	for ns, lu := range s.cfg.Lower.Usage() {
		i, ok := at[ns]
		if !ok {
			i = len(out)
			out = append(out, NamespaceUsage{Namespace: ns})
		}
		u := &out[i]
		b := both[names[ns]]
		if !ok {
			b = NamespaceUsage{}
		}
		u.DiskChunks, u.DiskBytes = lu.Chunks, lu.Bytes
		u.Chunks += max(0, lu.Chunks-b.Chunks)
		u.PayloadBytes += max(0, lu.Bytes-b.PayloadBytes)
	}
	return out
}

// DropNamespace removes every sealed chunk of ns and returns what it freed
// (Pinned counts the chunks that go when their pins end instead). Writes of
// ns in progress are not touched: they seal as usual. Readers holding a
// chunk's View keep its bytes until they release it.
func (s *Store) DropNamespace(ns string) (NamespaceUsage, error) {
	u, err := s.dropNamespace(ns)
	return s.dropLower(ns, u, err)
}

func (s *Store) dropNamespace(ns string) (NamespaceUsage, error) {
	if !s.enter() {
		return NamespaceUsage{}, ErrClosed
	}
	defer s.exit()
	s.mu.Lock()
	defer s.unlock()
	if s.closed {
		return NamespaceUsage{}, ErrClosed
	}
	freed := NamespaceUsage{Namespace: ns}
	n, ok := s.nsIDs[ns]
	if !ok {
		return freed, fmt.Errorf("cannot drop namespace %q: %w", ns, ErrNotFound)
	}
	var victims []*entry
	for _, head := range s.idx.m {
		for e := head; e != nil; e = e.next {
			if e.key.ns == n && e.state == stateSealed {
				victims = append(victims, e)
			}
		}
	}
	for _, e := range victims {
		if e.pins > 0 {
			e.evicted = true // unpin kills it
			freed.Pinned++
			continue
		}
		freed.Chunks++
		freed.PayloadBytes += int64(e.size)
		freed.SlotBytes += e.slot.seg.slotSize
		s.st.evictions[ReasonExplicit]++
		if s.kill(e, reasonExplicit) {
			s.forgetLater(e)
		}
	}
	return freed, nil
}

// Evict removes one sealed chunk (an operator debugging a bad chunk). It
// stops being readable at once; its slot is freed when its last View is
// released. A pinned chunk is ErrBusy; one not held is ErrNotFound.
func (s *Store) Evict(ns string, id ID) error { return s.evictLower(ns, id, s.evict(ns, id)) }
