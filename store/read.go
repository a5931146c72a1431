package store

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// View is a read-only window on a sealed chunk's bytes in shared memory. It
// holds a reference that keeps the slot from being freed or reused until
// Release; the bytes must not be modified or used after Release. A View may
// be read from many goroutines.
type View struct {
	s        *Store
	e        *entry
	buf      []byte
	released atomic.Bool
	// corrupted is set once the View reported a mismatch, so a second report
	// is not counted again. Guarded by the store's mu.
	corrupted bool
	// lower releases the bytes of a View read from the Lower tier (not in
	// shared memory; its entry is detached); nil otherwise.
	lower func()
}

// Name is the key SetName recorded for the chunk ("" for none).
func (v *View) Name() string {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	if v.e.name == nil {
		return ""
	}
	return *v.e.name
}

// Location says where a chunk lives, for handing its segment to a process on
// the same host (through segmentFile, unexported until the local socket uses
// it).
type Location struct {
	Segment uint32 // segment id, stable for the segment's life, never reused
	Offset  int64  // from byte 0 of the segment file
	Size    int64  // chunk length
	MapSize int64  // the segment file's length
}

// Get returns a View of the chunk after verifying its checksum: one pass over
// the bytes at memory speed. A chunk that is not held is ErrNotFound; one
// whose bytes fail the checksum is counted, dropped, and reported as
// ErrChecksum. One whose memory faults (its segment file was truncated under
// the store) is dropped (ReasonLost) and reported as ErrChecksum wrapping
// ErrFault, and its segment is marked lost. The caller must Release the
// View. Its bytes are a mapping of the segment file: a reader of View.Bytes
// is not protected from a fault if the file is truncated meanwhile.
func (s *Store) Get(ns string, id ID) (*View, error) {
	v, err := s.get(ns, id)
	if errors.Is(err, ErrNotFound) && s.cfg.Lower != nil {
		return s.readLower(ns, id, false, err) // outside the gate: a promotion enters it
	}
	return v, err
}

func (s *Store) get(ns string, id ID) (*View, error) {
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.exit()
	v, err := s.acquire(ns, id)
	if err != nil {
		return nil, err
	}
	if err := v.verify(); err != nil {
		v.release()
		return nil, err
	}
	return v, nil
}

func (s *Store) acquire(ns string, id ID) (*View, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	k, _, err := s.key(ns, id, true)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.st.gets++
	h := k.hash()
	e := s.idx.get(k, h)
	if e == nil || e.state != stateSealed {
		s.mu.Unlock()
		s.pol.touch(h)
		return nil, fmt.Errorf("chunk %s/%s: %w", ns, id, ErrNotFound)
	}
	e.refs++
	s.st.hits++
	s.mu.Unlock()
	s.pol.touch(h)
	return &View{s: s, e: e, buf: e.bytes()}, nil
}

func (v *View) verify() error {
	sum, err := guardedChecksum(v.buf)
	if err != nil {
		return v.lost(err)
	}
	if sum != v.e.crc {
		return v.corrupt(sum)
	}
	return nil
}

// lost drops a chunk whose memory faulted (fault wraps ErrFault) and checks
// its segment's file.
func (v *View) lost(fault error) error {
	s, e := v.s, v.e
	cause := s.faulted(e.slot.seg)
	s.mu.Lock()
	if e.state == stateSealed {
		s.st.hits--
		s.st.evictions[ReasonLost]++
		if s.kill(e, reasonLost) {
			s.forgetLater(e)
		}
	}
	ns := s.nsNames[e.key.ns]
	s.unlock()
	s.log.Warn("chunk memory faulted and the chunk was dropped", "namespace", ns, "id", e.key.id.String(), "err", fault, "cause", cause)
	return fmt.Errorf("chunk %s/%s: %w: %w", ns, e.key.id, ErrChecksum, fault)
}

func (v *View) corrupt(got uint32) error {
	s, e := v.s, v.e
	s.mu.Lock()
	if v.corrupted {
		ns := s.nsNames[e.key.ns]
		s.mu.Unlock()
		return fmt.Errorf("chunk %s/%s: %w", ns, e.key.id, ErrChecksum)
	}
	v.corrupted = true
	s.st.checksumErrs++
	if e.state == stateSealed {
		s.st.hits--
		s.st.evictions[ReasonChecksum]++
		if s.kill(e, reasonChecksum) {
			s.forgetLater(e)
		}
	}
	ns := s.nsNames[e.key.ns]
	s.unlock()
	s.log.Warn("chunk failed its checksum and was dropped", "namespace", ns, "id", e.key.id.String(),
		"want", fmt.Sprintf("%08x", e.crc), "got", fmt.Sprintf("%08x", got))
	return fmt.Errorf("chunk %s/%s: %w", ns, e.key.id, ErrChecksum)
}

// Bytes returns the chunk's bytes. Valid until Release.
func (v *View) Bytes() []byte { return v.buf }

// Checksum returns the chunk's CRC-32C.
func (v *View) Checksum() uint32 { return v.e.crc }

// Location returns where the chunk lives in shared memory.
func (v *View) Location() Location {
	seg := v.e.slot.seg
	if seg == nil { // read from the Lower tier: in no segment
		return Location{Size: int64(v.e.size)}
	}
	return Location{
		Segment: seg.id,
		Offset:  int64(v.e.slot.slot) * seg.slotSize,
		Size:    int64(v.e.size),
		MapSize: segmentFileSize(seg.slotSize, seg.nslots),
	}
}

// Release drops the View's reference. Idempotent.
func (v *View) Release() {
	if !v.s.enter() {
		return
	}
	defer v.s.exit()
	v.release()
}

func (v *View) release() {
	if v.released.Swap(true) {
		return
	}
	if v.lower != nil {
		v.lower()
		return
	}
	s := v.s
	s.mu.Lock()
	v.e.refs--
	s.maybeFree(v.e)
	s.mu.Unlock()
}

// Contains reports whether the chunk is held (sealed and readable) now.
func (s *Store) Contains(ns string, id ID) bool {
	return s.inState(ns, id, stateSealed) || s.lowerContains(ns, id)
}

// inState reports whether (ns, id) is in the index in state st. It takes the
// mutex briefly; false after Close.
func (s *Store) inState(ns string, id ID, st uint8) bool {
	if !s.enter() {
		return false
	}
	defer s.exit()
	s.mu.Lock()
	defer s.mu.Unlock()
	k, known, err := s.key(ns, id, false)
	if err != nil || !known {
		return false
	}
	e := s.idx.get(k, k.hash())
	return e != nil && e.state == st
}

// evict removes a chunk. It stops being readable at once; its slot is freed
// when its last View is released. A pinned chunk is not evicted: ErrBusy.
// A chunk that is not held is ErrNotFound. Evict is its exported form.
func (s *Store) evict(ns string, id ID) error { return s.remove(ns, id, false) }

// remove is evict; with unpin it removes a pinned chunk too (Delete).
func (s *Store) remove(ns string, id ID, unpin bool) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.exit()
	s.mu.Lock()
	defer s.unlock()
	if s.closed {
		return ErrClosed
	}
	k, known, err := s.key(ns, id, false)
	if err != nil {
		return err
	}
	var e *entry
	if known {
		e = s.idx.get(k, k.hash())
	}
	if e == nil || e.state != stateSealed {
		return fmt.Errorf("cannot evict chunk %s/%s: %w", ns, id, ErrNotFound)
	}
	if e.pins > 0 && !unpin {
		return fmt.Errorf("cannot evict chunk %s/%s: %w (pinned by a lookup lease)", ns, id, ErrBusy)
	}
	s.st.evictions[ReasonExplicit]++
	if s.kill(e, reasonExplicit) {
		s.forgetLater(e)
	}
	return nil
}

// Delete removes a chunk at once, even one that lookup leases pin: it
// stops being readable now, and its slot is freed when its last reader and
// lease end. A client's explicit removal (the Redis port's DEL) wins over
// the leases of lookups that found the chunk, which keep it from eviction,
// not from deletion. A chunk that is not held is ErrNotFound.
func (s *Store) Delete(ns string, id ID) error { return s.evictLower(ns, id, s.remove(ns, id, true)) }

// HeldChecksum returns the CRC-32C of the bytes of chunk (ns, id) when this
// store holds it sealed in shared memory; ok is false when it does not, or
// holds it only in the Lower tier (whose index the store does not read).
// It takes the mutex briefly and never reads the bytes.
func (s *Store) HeldChecksum(ns string, id ID) (sum uint32, ok bool) {
	if !s.enter() {
		return 0, false
	}
	defer s.exit()
	s.mu.Lock()
	defer s.mu.Unlock()
	k, known, err := s.key(ns, id, false)
	if err != nil || !known {
		return 0, false
	}
	e := s.idx.get(k, k.hash())
	if e == nil || e.state != stateSealed {
		return 0, false
	}
	return e.crc, true
}
