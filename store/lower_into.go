package store

import (
	"errors"
	"fmt"
)

// LowerInto is a Lower that can read a chunk straight into memory the
// caller provides. The store promotes a Lower chunk through it when the
// tier implements it: the chunk's bytes land in their new shared-memory
// slot without a copy through the tier's buffer, and the seal's checksum
// pass is the one pass over them.
type LowerInto interface {
	// SizeInto returns the payload bytes of a chunk the tier can read
	// straight into memory; false when it holds none or would copy it
	// (Read serves those).
	SizeInto(ns string, id ID) (int64, bool)
	// ReadInto reads the chunk's payload into dst (exactly SizeInto bytes) and
	// returns it as Read with verify false would (Bytes is dst), with the
	// errors of Read. The caller checks dst against CRC and calls Corrupt
	// when they differ.
	ReadInto(ns string, id ID, dst []byte) (LowerChunk, error)
}

// promoteInto promotes a chunk of a LowerInto tier by reading it straight
// into a new slot of its size, whose seal checks its checksum. done is false
// when it could not try (a chunk the tier would copy, no room, the slot's
// memory not to be handed out): the caller then reads the chunk the other
// way. A chunk the tier no longer holds is miss.
func (s *Store) promoteInto(d LowerInto, ns string, id ID, miss error) (v *View, err error, done bool) {
	size, ok := d.SizeInto(ns, id)
	if !ok {
		return nil, nil, false
	}
	w, err := s.stage("", ns, id, size, 0) // the checksum is known after the read
	if err != nil {
		return nil, nil, false
	}
	buf := w.Bytes()
	if buf == nil {
		w.Abort()
		return nil, nil, false
	}
	if w.fresh {
		s.prefault(buf) // one call for all pages, not a fault per page in the read
	}
	c, err := d.ReadInto(ns, id, buf)
	if err != nil {
		w.Abort()
		if errors.Is(err, ErrNotFound) {
			return nil, miss, true
		}
		return nil, err, true
	}
	defer c.Release()
	s.mu.Lock()
	w.e.crc = c.CRC
	s.mu.Unlock()
	if place, name, ok := decodeMeta(c.Meta); ok {
		if place != nil {
			w.SetPlacement(*place)
		}
		if name != nil {
			w.SetName(*name)
		}
	}
	if err := w.Seal(); err != nil {
		if errors.Is(err, ErrChecksum) && !errors.Is(err, ErrFault) {
			c.Corrupt(err)
			return nil, fmt.Errorf("chunk %s/%s from the lower tier: %w", ns, id, err), true
		}
		return nil, nil, false
	}
	return s.promoted(ns, id)
}

// promoted returns a View of a chunk just promoted from the Lower tier and
// counts the promotion; done is false when it is gone already. The chunk
// becomes the next to evict from shared memory: the tier holds it too, so
// its eviction writes nothing and loses nothing, and shared memory goes on
// holding the chunks the tier does not (the two tiers together hold more
// distinct chunks). A later hit in shared memory makes it the newest as any.
func (s *Store) promoted(ns string, id ID) (*View, error, bool) {
	if !s.enter() {
		return nil, nil, false
	}
	v, err := s.acquire(ns, id)
	s.exit()
	if err != nil {
		return nil, nil, false
	}
	s.pol.demote(v.e.hash)
	s.mu.Lock()
	s.st.promotions++
	s.st.lowerHits++
	s.mu.Unlock()
	return v, nil, true
}
