package store

// nsCounters are one namespace's running totals, guarded by the store's
// mutex. Slot bytes are what the namespace's sealed chunks take of the
// budget (payload plus allocator waste): what its share is measured in.
type nsCounters struct {
	chunks    int64 // sealed
	slotBytes int64 // slot bytes of the sealed chunks
	evictions uint64
	hits      uint64 // ids lookups found held
	misses    uint64 // ids lookups did not find
}

// NamespaceStat is one namespace's usage, counters and share on this
// store.
type NamespaceStat struct {
	Namespace string `json:"namespace"`
	Chunks    int64  `json:"chunks"`
	// Bytes is the memory its sealed chunks take (slots: payload plus
	// allocator waste), what its share is measured against.
	Bytes int64 `json:"bytes"`
	// Evictions counts its chunks the eviction policy removed.
	Evictions uint64 `json:"evictions"`
	// Hits and Misses count the chunk ids lookups (Has, Leading) asked
	// about: found held in memory, or not.
	Hits   uint64 `json:"hits"`
	Misses uint64 `json:"misses"`
	// Share is its share (zero: none); GuaranteeBytes and CapBytes are
	// that share in bytes of this store's budget.
	Share          Share `json:"share"`
	GuaranteeBytes int64 `json:"guarantee_bytes"`
	CapBytes       int64 `json:"cap_bytes"`
}

// nsSealed counts e, a chunk of its namespace, as sealed (delta 1) or no
// longer (delta -1). mu held.
func (s *Store) nsSealed(e *entry, delta int64) {
	c := &s.nsStats[e.key.ns]
	c.chunks += delta
	c.slotBytes += delta * e.slot.seg.slotSize
}

// nsLookups counts a lookup of asked ids of namespace number ns, found of
// them held. mu held.
func (s *Store) nsLookups(ns uint32, asked, found int) {
	c := &s.nsStats[ns]
	c.hits += uint64(found)
	c.misses += uint64(asked - found)
}

// NamespaceStats returns the usage, counters and share of every namespace
// this store has seen since Open, by namespace. Safe for concurrent use;
// takes the store's lock briefly (one step per namespace).
func (s *Store) NamespaceStats() map[string]NamespaceStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]NamespaceStat, len(s.nsNames))
	for i, ns := range s.nsNames {
		c := s.nsStats[i]
		sh := s.shares[ns]
		out[ns] = NamespaceStat{Namespace: ns, Chunks: c.chunks, Bytes: c.slotBytes, Evictions: c.evictions,
			Hits: c.hits, Misses: c.misses, Share: sh,
			GuaranteeBytes: sh.Guarantee.Of(s.cfg.MemoryLimit), CapBytes: sh.Cap.Of(s.cfg.MemoryLimit)}
	}
	return out
}
