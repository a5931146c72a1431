package store

import (
	"errors"
	"fmt"
)

// ErrBlobStaged: the blob's slot was handed to a chunk already (StageChunk);
// a blob becomes a chunk at most once. Write the chunk with Stage instead.
var ErrBlobStaged = errors.New("store: blob already staged as a chunk")

// StageChunk turns the blob's slot into the staged chunk (ns, id) whose
// CRC-32C is crc, without a copy: the slot is the chunk's from now on, and
// the returned Staged is complete (Check and Seal succeed unless the lease
// ends or the policy evicts it first; Write refuses more bytes). crc is
// checked against the sum the blob's last Checksum computed, or, when it
// has not run, against one pass over the bytes under a fault guard: a
// mismatch is ErrChecksum, a truncated segment ErrChecksum wrapping
// ErrFault; the blob is unchanged then. (Passing the sum on from Checksum
// loses nothing: a process that can write the blob between the two calls
// can write the chunk after StageChunk too, and Get verifies every read.)
//
// Memory accounting moves with the slot: the blob's bytes leave
// Stats.BlobBytes and count as a staged chunk (Stats.StagedBytes), then as
// a sealed one; the policy forgets the blob's placeholder and charges the
// chunk instead. The blob keeps a reader's reference to the chunk (as a
// View does): its Bytes and Location stay valid and unchanged until Free,
// which drops that reference; the slot is freed when neither the chunk nor
// the blob holds it. Bytes written into the blob after StageChunk change
// the chunk (a later Get reports ErrChecksum and drops it): the caller
// must not write a blob it staged.
//
// Errors, with the blob unchanged: those of Stage (ErrAlreadyHeld,
// ErrBusy, ErrRejected, ErrNoSpace for the staged-bytes limit, ErrInvalid,
// ErrClosed), ErrChecksum, and ErrBlobStaged when it was called before
// (successfully) or after Free. Blocks like Stage while the policy decides.
func (b *Blob) StageChunk(ns string, id ID, crc uint32) (*Staged, error) {
	s := b.s
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.exit()
	size := b.size
	sum, err := b.checkSum(ns, id, crc)
	if err != nil {
		return nil, err
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if b.freed || b.chunk != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("cannot stage chunk %s/%s: %w", ns, id, ErrBlobStaged)
	}
	e, err := s.addStaged("", ns, id, size, crc)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	h := e.hash
	b.chunk = e // claimed: a concurrent StageChunk or Free waits for the outcome
	b.staging = true
	s.mu.Unlock()

	// The chunk takes the placeholder's place in the policy's budget: the
	// slot is already counted by the arena, so nothing needs room.
	cost := classSize(size)
	s.pol.forget(b.h)
	for range stageTouches {
		s.pol.touch(h)
	}
	queued := s.pol.offer(e, cost)
	if queued {
		s.pol.settle(e)
	}

	s.mu.Lock()
	defer s.unlock()
	b.staging = false
	if !queued || e.rejected || e.evicted || e.state != stateStaged || b.freeWanted {
		if s.kill(e, reasonRejected) {
			s.forgetLater(e)
		}
		b.chunk = nil
		if !b.freeWanted {
			s.st.rejections[ReasonPolicy]++
		}
		// The blob keeps its slot: charge its placeholder again.
		s.mu.Unlock()
		s.offerPlaceholder(b)
		s.mu.Lock()
		if b.freeWanted && b.freeLocked() {
			s.forgets = append(s.forgets, b.h)
		}
		return nil, fmt.Errorf("cannot stage chunk %s/%s (%d bytes): %w", ns, id, size, ErrRejected)
	}
	e.slot = b.ref
	e.hasSlot = true
	e.refs++ // the blob's reference, dropped by Free
	s.blobs.count--
	s.blobs.bytes -= size
	s.staging[e] = s.cfg.Now().Add(s.cfg.StageLease).UnixNano()
	if b.freeWanted {
		b.freeLocked()
	}
	return &Staged{s: s, e: e, buf: e.bytes(), written: size, crc: sum}, nil
}

// checkSum returns the CRC-32C of the blob's bytes (remembered, or
// computed now under a fault guard), or ErrChecksum when it is not crc.
func (b *Blob) checkSum(ns string, id ID, crc uint32) (uint32, error) {
	s := b.s
	s.mu.Lock()
	sum, summed := b.sum, b.summed
	s.mu.Unlock()
	if !summed {
		var err error
		if sum, err = guardedChecksumParts(b.Bytes(), s.cfg.ChecksumParts); err != nil {
			return 0, fmt.Errorf("cannot stage chunk %s/%s from a blob: %w: %w", ns, id, ErrChecksum, err)
		}
	}
	if sum != crc {
		return 0, fmt.Errorf("cannot stage chunk %s/%s from a blob: %w: bytes have %08x, expected %08x", ns, id, ErrChecksum, sum, crc)
	}
	return sum, nil
}

// offerPlaceholder charges the blob's pinned placeholder to the policy.
// mu not held.
func (s *Store) offerPlaceholder(b *Blob) {
	e := &entry{hash: b.h, policy: true}
	e.pinned.Store(true)
	if s.pol.offer(e, classSize(b.size)) {
		s.pol.wait()
	}
}

// Complete reports whether every byte of the staged chunk is in its slot
// already (StageChunk, or Write of the whole chunk): no more bytes may be
// written.
func (w *Staged) Complete() bool { return w != nil && w.written == int64(len(w.buf)) }

// Read runs f with the blob's bytes under a fault guard: if another process
// truncated the segment file, the fault is an error wrapping ErrFault, not
// a crash. f must not keep the slice, must not hand it to other goroutines
// while it runs, and must leave no lock held if it stops half-way. Blocks
// as long as f; ErrClosed after Close.
func (b *Blob) Read(f func([]byte)) error {
	if !b.s.enter() {
		return ErrClosed
	}
	defer b.s.exit()
	if err := guardFault(func() { f(b.Bytes()) }); err != nil {
		return fmt.Errorf("cannot read blob: %w", err)
	}
	return nil
}
