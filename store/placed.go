package store

// Placement keys and the listing of what a node holds: what the node's
// hand-off needs to find the chunks whose owners changed. The store only
// keeps the keys; it knows nothing of rings or owners.

// SetPlacement records that the staged chunk is placed on the ring by key
// (its placement group's key) rather than by its id. It is kept with the
// chunk once sealed, in memory and in the catalog (40 bytes more per
// chunk). Call it before Seal, and only for chunks of namespaces placed by
// groups: Held reports the others as placed by their ids.
func (w *Staged) SetPlacement(key ID) {
	if w == nil || w.e == nil {
		return
	}
	k := key
	w.s.mu.Lock()
	w.e.place = &k
	w.s.mu.Unlock()
}

// SetName records the key a chunk written through the Redis protocol was
// stored under. It is kept with the chunk once sealed, in memory and in the
// catalog, and listed by Names. Call it before Seal.
func (w *Staged) SetName(name string) {
	if w == nil || w.e == nil {
		return
	}
	w.s.mu.Lock()
	w.e.name = &name
	w.s.mu.Unlock()
}

// HeldChunk is a sealed chunk as Held lists it.
type HeldChunk struct {
	Namespace string
	ID        ID
	// Place is the key the chunk is placed by on the ring: its id, or the
	// key SetPlacement recorded.
	Place ID
	// Keyed reports whether SetPlacement recorded Place. A chunk of a
	// namespace placed by groups without it was stored before placement
	// keys were kept: where it belongs is unknown.
	Keyed bool
	Size  int64
	// Name is the key SetName recorded ("" for none).
	Name string
}

// Held lists every sealed chunk. It copies the index under the store's
// mutex (about 100 bytes per chunk; a 1M-chunk store holds the mutex for
// tens of milliseconds): for the node's hand-off, not for a data path. The
// caller owns the slice.
func (s *Store) Held() []HeldChunk { return s.heldLower(s.held()) }

// EachHeld calls f with every sealed chunk, as Held lists them, without
// copying the listing: the chunks in shared memory under the store's mutex,
// then the disk tier's (a chunk in both may come twice). f must not call
// the store, and every other call waits for the walk: for a node's start,
// before it serves (a copy of a million chunks costs a second there).
func (s *Store) EachHeld(f func(HeldChunk)) {
	if !s.enter() {
		return
	}
	defer s.exit()
	s.mu.Lock()
	for _, head := range s.idx.m {
		for e := head; e != nil; e = e.next {
			if e.state == stateSealed {
				f(heldOf(s.nsNames[e.key.ns], e))
			}
		}
	}
	s.mu.Unlock()
	if s.cfg.Lower != nil {
		s.cfg.Lower.Held(func(ns string, id ID, size int64, meta []byte) { f(lowerHeld(ns, id, size, meta)) })
	}
}

// heldOf is e as Held lists it.
func heldOf(ns string, e *entry) HeldChunk {
	h := HeldChunk{Namespace: ns, ID: e.key.id, Place: e.key.id, Size: int64(e.size)}
	if e.place != nil {
		h.Place, h.Keyed = *e.place, true
	}
	if e.name != nil {
		h.Name = *e.name
	}
	return h
}

func (s *Store) held() []HeldChunk {
	if !s.enter() {
		return nil
	}
	defer s.exit()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]HeldChunk, 0, s.idx.n)
	for _, head := range s.idx.m {
		for e := head; e != nil; e = e.next {
			if e.state != stateSealed {
				continue
			}
			out = append(out, heldOf(s.nsNames[e.key.ns], e))
		}
	}
	return out
}
