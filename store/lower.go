package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvring/kvring/internal/crc32c"
)

// Lower is a slower tier under the shared memory (the disk tier,
// store/disk): it keeps what the eviction policy evicts, and the store asks
// it for what its own index lacks, so a chunk it holds is held by the
// store: Has, Contains, Get, Lend, Held, Evict and DropNamespace see it.
// Set it in Config.Lower; the caller opens it before the store and closes
// it after. The store calls every method without holding its mutex except
// Contains and Pin, which must not block (they take the tier's own lock
// briefly); a Lower never calls the store.
type Lower interface {
	// Offload takes a chunk the policy evicts. fill copies the chunk's
	// bytes into dst (size bytes, owned by the tier) and returns an error
	// when they cannot be read or do not match crc. meta is the chunk's
	// placement key and name (copied). It returns whether the tier holds
	// the chunk now. It must not block on I/O: a tier that cannot keep up
	// drops the offload.
	Offload(ns string, id ID, crc uint32, size int, meta []byte, fill func(dst []byte) error) bool
	// Contains reports whether the tier holds the chunk.
	Contains(ns string, id ID) bool
	// Pin is Contains for a lookup: the tier counts it as a use of the
	// chunk (as a read), and keeps the chunk from being evicted until the
	// unix-nanosecond time until (0: no pin), as far as the tier can.
	Pin(ns string, id ID, until int64) bool
	// Read returns the chunk's bytes (ErrNotFound when not held,
	// ErrChecksum when they cannot be read or fail a check: the tier drops
	// it). With verify the payload's checksum is checked; without it the
	// tier may leave that to the caller (Verified false), who checks Bytes
	// against CRC as it copies them and calls Corrupt on a mismatch. The
	// caller calls Release once and then no longer touches Bytes.
	Read(ns string, id ID, verify bool) (LowerChunk, error)
	// Remove drops the chunk and reports whether the tier held it.
	Remove(ns string, id ID) bool
	// DropNamespace drops every chunk of ns.
	DropNamespace(ns string) (chunks, bytes int64)
	// Held calls f for every chunk the tier holds; meta is valid during
	// the call. It holds none of the tier's locks while f runs.
	Held(f func(ns string, id ID, size int64, meta []byte))
	// Usage returns the chunks and payload bytes the tier holds, by
	// namespace (an admin call).
	Usage() map[string]LowerUsage
}

// LowerUsage is what a Lower tier holds of one namespace.
type LowerUsage struct {
	Chunks, Bytes int64
}

// LowerChunk is a chunk read from a Lower tier.
type LowerChunk struct {
	Bytes []byte // the payload, owned by the tier until Release
	CRC   uint32
	Meta  []byte // what Offload was given
	// Hot reports a chunk read from the tier recently before: the store
	// promotes it back into shared memory.
	Hot bool
	// Verified reports that Bytes were checked against CRC; when false the
	// caller must check them before serving them.
	Verified bool
	Release  func()
	// Corrupt tells the tier that Bytes do not match CRC: it drops the
	// chunk and counts it. Call it before Release.
	Corrupt func(cause error)
}

// offloadLocked copies a sealed, unpinned chunk the policy is evicting into
// the Lower tier. It holds a reference on e and releases mu meanwhile, so
// the copy runs outside the store's lock and the slot cannot be freed
// under it; the chunk stays readable in shared memory until the caller
// kills it, and in the tier from the Offload on, so a lookup never finds it
// in neither. It reports whether the caller should now kill e: false when
// the store closed, e died meanwhile (its Lower copy is removed again if it
// was evicted explicitly), or a pin arrived (with force, e is then marked
// evicted and dies with its pins). mu held.
func (s *Store) offloadLocked(e *entry, force bool) bool {
	low := s.cfg.Lower
	ns := s.nsNames[e.key.ns]
	meta := encodeMeta(e.place, e.name)
	b := e.bytes()
	e.refs++
	s.offloading++
	s.mu.Unlock()
	low.Offload(ns, e.key.id, e.crc, len(b), meta, func(dst []byte) error {
		var sum uint32
		// Non-temporal stores: the tier's buffer goes to the disk, not back
		// through this core's cache, which keeps the put's own bytes.
		nt := len(b) >= crc32c.CopyNonTemporalMin
		if err := guardFault(func() { sum = crc32c.CopyChecksumStores(dst, b, 0, nt) }); err != nil {
			return err
		}
		if sum != e.crc {
			return fmt.Errorf("%w: bytes have %08x, expected %08x", ErrChecksum, sum, e.crc)
		}
		return nil
	})
	s.mu.Lock()
	e.refs--
	s.offloading--
	s.offloaded.Broadcast()
	switch {
	case s.closed:
		return false
	case e.state != stateSealed:
		if e.reason == reasonExplicit {
			low.Remove(ns, e.key.id)
		}
		s.maybeFree(e)
		return false
	case e.pins > 0:
		if force {
			e.policy = false
			e.evicted = true
		}
		return false
	}
	return true
}

// readLower serves a chunk the index does not hold from the Lower tier,
// outside the store's gate (enter: a promotion's calls enter it themselves)
// (miss is the index's ErrNotFound, returned when the tier lacks it too).
// With promote set (Lend: a local process may be handed the chunk's
// segment) or when the tier calls the chunk hot (read before, recently), it
// is copied back into shared memory and a View of that is returned; when
// the copy fails (no room, a writer staging it) the View holds the tier's
// buffer, verified, in no segment (Location has no segment).
func (s *Store) readLower(ns string, id ID, promote bool, miss error) (*View, error) {
	if d, ok := s.cfg.Lower.(LowerInto); ok && promote {
		if v, err, done := s.promoteInto(d, ns, id, miss); done {
			return v, err
		}
	}
	c, err := s.cfg.Lower.Read(ns, id, false)
	if errors.Is(err, ErrNotFound) {
		return nil, miss
	}
	if err != nil {
		return nil, err
	}
	if promote || c.Hot {
		v, err := s.promote(ns, id, c)
		if v != nil || err != nil {
			c.Release()
			return v, err
		}
	}
	if !c.Verified {
		if sum := crc32c.Checksum(c.Bytes); sum != c.CRC {
			err := fmt.Errorf("chunk %s/%s from the lower tier: %w: bytes have %08x, expected %08x", ns, id, ErrChecksum, sum, c.CRC)
			c.Corrupt(err)
			c.Release()
			return nil, err
		}
	}
	s.mu.Lock()
	k, _, err := s.key(ns, id, true)
	if err == nil && !s.closed {
		s.st.hits++
		s.st.lowerHits++
	}
	s.mu.Unlock()
	if err != nil {
		c.Release()
		return nil, err
	}
	e := &entry{key: k, hash: k.hash(), size: uint32(len(c.Bytes)), crc: c.CRC, state: stateDead}
	return &View{s: s, e: e, buf: c.Bytes, lower: c.Release}, nil
}

// promote copies a chunk read from the Lower tier back into shared memory
// and returns a View of it, or nil when that failed (c is then untouched).
// The copy checks the bytes against their checksum in the same pass: a
// mismatch is reported to the tier (Corrupt) and returned as ErrChecksum.
func (s *Store) promote(ns string, id ID, c LowerChunk) (*View, error) {
	w, err := s.stage("", ns, id, int64(len(c.Bytes)), c.CRC)
	if err != nil {
		return nil, nil
	}
	if place, name, ok := decodeMeta(c.Meta); ok {
		if place != nil {
			w.SetPlacement(*place)
		}
		if name != nil {
			w.SetName(*name)
		}
	}
	if _, err := w.Write(c.Bytes); err != nil {
		w.Abort()
		return nil, nil
	}
	if err := w.Check(); errors.Is(err, ErrChecksum) {
		w.Abort()
		c.Corrupt(err)
		return nil, fmt.Errorf("chunk %s/%s from the lower tier: %w", ns, id, err)
	}
	if err := w.Seal(); err != nil {
		return nil, nil
	}
	v, _, _ := s.promoted(ns, id)
	return v, nil
}

// lowerContains reports whether the Lower tier holds the chunk.
func (s *Store) lowerContains(ns string, id ID) bool {
	return s.cfg.Lower != nil && s.cfg.Lower.Contains(ns, id)
}

// probeLower completes a probe's answer with what the Lower tier holds
// (a use of each chunk there, pinned too when pinFor > 0) and returns the
// new count n.
func (s *Store) probeLower(ns string, ids []ID, held []bool, n int, pinFor time.Duration, leading bool) int {
	low := s.cfg.Lower
	var until int64
	if pinFor > 0 {
		until = s.cfg.Now().Add(pinFor).UnixNano()
	}
	has := func(ns string, id ID) bool { return low.Pin(ns, id, until) }
	if leading {
		for n < len(ids) && has(ns, ids[n]) {
			n++
		}
		return n
	}
	for i := range held {
		if !held[i] && has(ns, ids[i]) {
			held[i] = true
			n++
		}
	}
	return n
}

// dropLower adds what the Lower tier drops of ns to the shared memory's
// answer u (err: a namespace unknown there is no error when the tier had
// chunks of it).
func (s *Store) dropLower(ns string, u NamespaceUsage, err error) (NamespaceUsage, error) {
	if s.cfg.Lower == nil || err != nil && !errors.Is(err, ErrNotFound) {
		return u, err
	}
	c, b := s.cfg.Lower.DropNamespace(ns)
	if c > 0 {
		u.Namespace = ns
		u.Chunks += c
		u.PayloadBytes += b
		err = nil
	}
	return u, err
}

// evictLower removes the chunk from the Lower tier too, after the shared
// memory's Evict answered err.
func (s *Store) evictLower(ns string, id ID, err error) error {
	if s.cfg.Lower == nil || err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if s.cfg.Lower.Remove(ns, id) {
		return nil
	}
	return err
}

// heldLower appends the chunks only the Lower tier holds to out.
func (s *Store) heldLower(out []HeldChunk) []HeldChunk {
	if s.cfg.Lower == nil {
		return out
	}
	type nk struct {
		ns string
		id ID
	}
	seen := make(map[nk]struct{}, len(out))
	for _, h := range out {
		seen[nk{h.Namespace, h.ID}] = struct{}{}
	}
	s.cfg.Lower.Held(func(ns string, id ID, size int64, meta []byte) {
		if _, ok := seen[nk{ns, id}]; ok {
			return
		}
		out = append(out, lowerHeld(ns, id, size, meta))
	})
	return out
}

// lowerHeld is a chunk of the lower tier as Held lists it.
func lowerHeld(ns string, id ID, size int64, meta []byte) HeldChunk {
	h := HeldChunk{Namespace: ns, ID: id, Place: id, Size: size}
	if place, name, ok := decodeMeta(meta); ok {
		if place != nil {
			h.Place, h.Keyed = *place, true
		}
		if name != nil {
			h.Name = *name
		}
	}
	return h
}

// Meta flags: what encodeMeta wrote after its first byte.
const (
	metaPlace = 1 << iota // a 32-byte placement key
	metaName              // the rest is the name
)

// encodeMeta packs a chunk's placement key and name for the Lower tier.
func encodeMeta(place *ID, name *string) []byte {
	b := []byte{0}
	if place != nil {
		b[0] |= metaPlace
		b = append(b, place[:]...)
	}
	if name != nil {
		b[0] |= metaName
		b = append(b, *name...)
	}
	return b
}

// decodeMeta unpacks encodeMeta's bytes; ok is false for bytes it did not
// write.
func decodeMeta(b []byte) (place *ID, name *string, ok bool) {
	if len(b) == 0 {
		return nil, nil, false
	}
	f, rest := b[0], b[1:]
	if f&metaPlace != 0 {
		if len(rest) < IDSize {
			return nil, nil, false
		}
		var p ID
		copy(p[:], rest)
		place, rest = &p, rest[IDSize:]
	}
	if f&metaName != 0 {
		n := string(rest)
		name = &n
	}
	return place, name, true
}
