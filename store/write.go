package store

import (
	"errors"
	"fmt"

	"github.com/kvring/kvring/internal/crc32c"
)

// stageTouches is how many accesses a write counts for in the eviction
// policy (TinyLFU's frequency sketch; LRU does not know the chunk yet).
const stageTouches = 2

// Staged is a reserved, invisible slot for one chunk. It belongs to the
// goroutine that staged it until Seal or Abort; it is not safe for
// concurrent use.
type Staged struct {
	s       *Store
	e       *entry
	buf     []byte // the slot, sized to the chunk
	written int64  // bytes given to Write so far
	crc     uint32 // running checksum of those bytes
	direct  bool   // Bytes was called: the checksum is computed at Seal
	fresh   bool   // the slot's pages are not resident yet: Write prefaults them
	done    bool   // sealed or aborted
}

// Stage reserves a slot for the chunk (ns, id) of size bytes whose CRC-32C is
// crc, and starts its lease (Config.StageLease, on Config.Now). It offers the
// chunk to the eviction policy without waiting for the decision, unless the
// budget has no room for the slot: then it waits for the policy, which evicts
// chunks to make room. Otherwise the decision is collected at Seal while the
// caller copies the bytes. Then it reserves the slot in the budget. Errors:
// ErrInvalid (bad namespace or size), ErrAlreadyHeld (nothing to do), ErrBusy
// (another writer is staging it), ErrRejected (the policy has already
// declined or evicted it), ErrNoSpace (the budget has no room: the rest is
// staged, pinned or held by readers), ErrCatalog (the last catalog write
// failed: a chunk sealed now would not survive a restart, so none is taken
// until a write succeeds), ErrClosed. With PolicyTinyLFU it blocks
// while it waits for the decision (a full budget) or for room in ristretto's
// buffer; with PolicyLRU the decision is made in the call.
func (s *Store) Stage(ns string, id ID, size int64, crc uint32) (*Staged, error) {
	return s.StageFor("", ns, id, size, crc)
}

// StageFor is Stage for a client (package fairshare's share of
// MaxStagedBytes): a stage that would take the client past its share is
// refused with ErrNoSpace, naming the client's holding and share. Client ""
// is the node's own work, charged to no share.
func (s *Store) StageFor(client, ns string, id ID, size int64, crc uint32) (*Staged, error) {
	if s.cfg.Lower != nil && s.cfg.Lower.Contains(ns, id) {
		return nil, fmt.Errorf("cannot stage chunk %s/%s: %w (on disk)", ns, id, ErrAlreadyHeld)
	}
	return s.stage(client, ns, id, size, crc)
}

// stage is StageFor without asking the Lower tier (a promotion from it).
func (s *Store) stage(client, ns string, id ID, size int64, crc uint32) (*Staged, error) {
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.exit()
	if size <= 0 {
		return nil, fmt.Errorf("%w: chunk %s size must be positive, got %d", ErrInvalid, id, size)
	}
	if size > s.cfg.MaxChunkSize {
		return nil, fmt.Errorf("%w: chunk %s is %d bytes, larger than the maximum %d", ErrInvalid, id, size, s.cfg.MaxChunkSize)
	}
	if cs := classSize(size); cs > s.cfg.MemoryLimit {
		return nil, fmt.Errorf("%w: chunk %s of %d bytes needs a %d-byte slot, more than the memory limit %d", ErrInvalid, id, size, cs, s.cfg.MemoryLimit)
	}
	if err := s.cat.health(); err != nil {
		// A chunk sealed now could not be recorded: a restart would lose it.
		return nil, fmt.Errorf("cannot stage chunk %s/%s: %w", ns, id, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	e, err := s.addStaged(client, ns, id, size, crc)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	h := e.hash

	// Queue the policy's decision; wait for it only when the budget has no
	// room, since the policy then evicts victims to make room. Otherwise the
	// decision is collected at Seal, and the copy overlaps it.
	cost := classSize(size)
	// A chunk being written is the most recently used of all: count the
	// write as accesses so the sampled-LFU eviction prefers older chunks
	// over staged ones (a staged chunk evicted before its seal is a write
	// refused after its bytes moved).
	for range stageTouches {
		s.pol.touch(h)
	}
	queued := s.pol.offer(e, cost)

	s.mu.Lock()
	defer s.unlock()
	if queued && s.arena.used+cost > s.arena.limit {
		s.mu.Unlock()
		s.pol.wait()
		s.mu.Lock()
	}
	if !queued || e.rejected || e.evicted || e.state != stateStaged {
		forget := s.kill(e, reasonRejected)
		s.st.rejections[ReasonPolicy]++
		if forget {
			s.forgetLater(e)
		}
		return nil, fmt.Errorf("cannot stage chunk %s/%s (%d bytes): %w", ns, id, size, ErrRejected)
	}
	fresh, err := s.slotFor(e, size)
	if err != nil {
		return nil, fmt.Errorf("cannot stage chunk %s/%s: %w", ns, id, err)
	}
	s.staging[e] = s.cfg.Now().Add(s.cfg.StageLease).UnixNano()
	return &Staged{s: s, e: e, buf: e.bytes(), fresh: fresh}, nil
}

// slotFor gives staged entry e a slot of size bytes (fresh reports pages
// not yet resident), or kills it and counts the refusal. s.mu held
// (released while allocReclaiming waits).
func (s *Store) slotFor(e *entry, size int64) (fresh bool, err error) {
	r, fresh, err := s.allocReclaiming(size, e, func() bool {
		return !e.rejected && !e.evicted && e.state == stateStaged
	})
	if err == nil {
		e.slot = r
		e.hasSlot = true
		err = s.allocateSlot(e, fresh)
	}
	if err != nil {
		if s.kill(e, reasonRejected) {
			s.forgetLater(e)
		}
		if errors.Is(err, ErrRejected) {
			s.st.rejections[ReasonPolicy]++
		} else {
			s.st.rejections[ReasonNoSpace]++
		}
		return false, err
	}
	return fresh, nil
}

// addStaged indexes a new staged entry for (ns, id) with no slot and no
// lease yet, counting it as staged. Errors: those of key, ErrAlreadyHeld,
// ErrBusy, ErrNoSpace (the staged-bytes limit, or client's share of it).
// mu held.
func (s *Store) addStaged(client, ns string, id ID, size int64, crc uint32) (*entry, error) {
	k, _, err := s.key(ns, id, true)
	if err != nil {
		return nil, err
	}
	h := k.hash()
	if e := s.idx.get(k, h); e != nil {
		if e.state == stateSealed { // read under mu: Seal and kill write it
			return nil, fmt.Errorf("cannot stage chunk %s/%s: %w", ns, id, ErrAlreadyHeld)
		}
		return nil, fmt.Errorf("cannot stage chunk %s/%s: %w", ns, id, ErrBusy)
	}
	if staged := s.st.stagedBytes; staged+size > s.cfg.MaxStagedBytes {
		s.st.rejections[ReasonNoSpace]++
		return nil, fmt.Errorf("cannot stage chunk %s/%s (%d bytes): %w: writes in progress hold %d bytes, at most %d may be staged at once",
			ns, id, size, ErrNoSpace, staged, s.cfg.MaxStagedBytes)
	}
	e := &entry{key: k, hash: h, size: uint32(size), crc: crc, state: stateStaged, policy: true}
	if err := s.takeStaged(client, e, size); err != nil {
		s.st.rejections[ReasonNoSpace]++
		return nil, fmt.Errorf("cannot stage chunk %s/%s (%d bytes): %w", ns, id, size, err)
	}
	s.idx.put(e)
	s.staging[e] = 0 // no lease until the slot is reserved
	s.st.stagedChunks++
	s.st.stagedBytes += size
	s.st.stages++
	return e, nil
}

// allocateSlot has the filesystem back the pages of e's fresh slot with
// space before any byte is written (segment.allocate), so that a full shm
// filesystem is ErrNoSpace here rather than a fault during the copy. A
// reused (dirty) slot was allocated when it was fresh and costs nothing
// (after a restart a recovered slot may lack pages past its old chunk; a
// fault there is still caught by guardFault). It releases mu meanwhile: e is staged with a slot and no lease yet, so
// nothing frees the slot, and Close waits for the caller. On a filesystem
// without fallocate it logs once and does nothing from then on (a fault in
// the copy is still caught: guardFault). mu held.
func (s *Store) allocateSlot(e *entry, fresh bool) error {
	if !fresh || s.noFallocate.Load() {
		return nil
	}
	seg, i := e.slot.seg, e.slot.slot
	s.mu.Unlock()
	err := seg.allocate(i)
	s.mu.Lock()
	if errors.Is(err, errFallocateUnsupported) {
		if !s.noFallocate.Swap(true) {
			s.log.Warn("the shared-memory filesystem cannot allocate space ahead of writes; when it is full, the copy finds out",
				"shm_dir", s.cfg.ShmDir)
		}
		return nil
	}
	return err
}

// Size is the chunk's length in bytes.
func (w *Staged) Size() int64 { return int64(len(w.buf)) }

// Write appends p to the staged chunk, copying it into shared memory and
// updating the checksum in the same pass. Writing past the chunk's size is
// ErrInvalid (nothing is written); a write after the lease expired is
// ErrLeaseExpired, after Seal or Abort ErrNotStaged. A fault of the shared
// memory during the copy (ErrFault, with ErrSegmentLost when the segment
// file was deleted or truncated, ErrNoSpace otherwise) leaves the chunk
// incomplete: the caller aborts it.
func (w *Staged) Write(p []byte) (int, error) {
	return w.WriteBuffers([][]byte{p})
}

// WriteBuffers appends the pieces in bufs, in order, as one Write of their
// concatenation would: the slot is claimed once and, if its pages are not
// resident yet, prefaulted once for all of them. Nothing is written when
// they would run past the chunk's size.
func (w *Staged) WriteBuffers(bufs [][]byte) (int, error) {
	if w == nil || w.e == nil {
		return 0, fmt.Errorf("cannot write: %w (no Stage)", ErrNotStaged)
	}
	if w.done {
		return 0, ErrNotStaged
	}
	n := int64(0)
	for _, p := range bufs {
		n += int64(len(p))
	}
	if w.written+n > int64(len(w.buf)) {
		return 0, fmt.Errorf("%w: %d bytes written past the chunk's size %d", ErrInvalid, w.written+n, len(w.buf))
	}
	if !w.s.enter() {
		return 0, ErrClosed
	}
	defer w.s.exit()
	if err := w.hold(); err != nil {
		return 0, err
	}
	if w.fresh {
		w.s.prefault(w.buf[w.written : w.written+n])
	}
	nt := n >= crc32c.CopyNonTemporalMin
	start := w.written
	ferr := guardFault(func() {
		for _, p := range bufs {
			w.crc = crc32c.CopyChecksumStores(w.buf[w.written:], p, w.crc, nt)
			w.written += int64(len(p))
		}
	})
	if ferr != nil {
		cause := w.s.faulted(w.e.slot.seg)
		if cause == nil {
			cause = fmt.Errorf("%w on the shared-memory filesystem for the chunk's pages", ErrNoSpace)
		}
		w.unhold()
		return int(w.written - start), fmt.Errorf("cannot write chunk %s: %w: %w", w.e.key.id, cause, ferr)
	}
	w.unhold()
	return int(n), nil
}

// Bytes returns the whole slot for the caller to fill directly (zero-copy
// writers). The slice is valid until Seal or Abort, even if the lease
// expires meanwhile (the chunk is then refused at Seal, but its slot is kept
// until then); the checksum is computed over the slot at Seal. Bytes returns
// nil once the chunk is no longer staged or the store is closing.
func (w *Staged) Bytes() []byte {
	if w == nil || w.e == nil || w.done {
		return nil
	}
	if !w.direct {
		// The slot must outlive the stage lease while the caller writes into
		// it: hold it until Seal or Abort.
		if !w.s.enter() {
			return nil
		}
		err := w.hold()
		w.s.exit()
		if err != nil {
			return nil
		}
		w.direct = true
	}
	return w.buf
}

// hold marks a writer active so the lease cannot free the slot under it.
func (w *Staged) hold() error {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if w.e.state != stateStaged {
		return w.deadErr()
	}
	w.e.refs++
	return nil
}

func (w *Staged) unhold() {
	s := w.s
	s.mu.Lock()
	w.e.refs--
	s.maybeFree(w.e)
	s.mu.Unlock()
}

// deadErr explains why a staged entry is no longer staged. mu held.
func (w *Staged) deadErr() error {
	switch w.e.reason {
	case reasonExpired:
		return fmt.Errorf("chunk %s: %w", w.e.key.id, ErrLeaseExpired)
	case reasonAborted:
		return fmt.Errorf("chunk %s: %w (aborted)", w.e.key.id, ErrNotStaged)
	case reasonPolicy, reasonRejected:
		return fmt.Errorf("chunk %s: %w", w.e.key.id, ErrRejected)
	}
	return fmt.Errorf("chunk %s: %w", w.e.key.id, ErrNotStaged)
}

// Check reports whether the staged chunk is complete and matches its
// checksum, without publishing it: the vote of a two-phase write. Seal checks
// again. It costs nothing for bytes given to Write (their checksum was
// computed as they were copied) and one pass over the slot for direct
// writers.
func (w *Staged) Check() error {
	if w == nil || w.e == nil {
		return fmt.Errorf("cannot check: %w (no Stage)", ErrNotStaged)
	}
	if w.done {
		return fmt.Errorf("cannot check chunk %s: %w", w.e.key.id, ErrNotStaged)
	}
	var sum uint32
	switch {
	case w.direct:
		if !w.s.enter() {
			return ErrClosed
		}
		var err error
		sum, err = guardedChecksum(w.buf)
		w.s.exit()
		if err != nil {
			return fmt.Errorf("chunk %s: %w: %w", w.e.key.id, ErrChecksum, err)
		}
	case w.written != int64(len(w.buf)):
		return fmt.Errorf("chunk %s: %w: %d of %d bytes written", w.e.key.id, ErrIncomplete, w.written, len(w.buf))
	default:
		sum = w.crc
	}
	if sum != w.e.crc {
		return fmt.Errorf("chunk %s: %w: bytes have %08x, expected %08x", w.e.key.id, ErrChecksum, sum, w.e.crc)
	}
	return nil
}

// Seal verifies the checksum, collects the eviction policy's decision and
// publishes the chunk: from now on it is readable. After a successful Seal a
// second one reports ErrAlreadyHeld; after a failed one, ErrNotStaged. On
// ErrChecksum, ErrIncomplete, ErrLeaseExpired (ExpireNow ended the lease) or
// ErrRejected (the policy declined to admit the chunk, or evicted it while it
// was staged to make room for others) the slot is freed and the chunk is not
// held. A chunk whose segment file was deleted or truncated meanwhile is
// refused (ErrSegmentLost; a retry lands in a new segment): a restart would
// not serve it. So is a chunk sealed while the last catalog write failed
// (ErrCatalog): its record could not be written either. A successful Seal
// queues the chunk's record; the caller that acknowledges the write calls
// FlushCatalog first, and must not acknowledge it when that fails (the
// chunk is held, but a restart would not serve it). With PolicyTinyLFU it blocks until ristretto has decided
// about the chunk, when it has not yet; a writer that used Bytes waits for
// one checksum pass over the slot.
func (w *Staged) Seal() error {
	if w == nil || w.e == nil {
		return fmt.Errorf("cannot seal: %w (no Stage)", ErrNotStaged)
	}
	s := w.s
	if !s.enter() {
		return ErrClosed
	}
	defer s.exit()
	if w.done {
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.e.state == stateSealed {
			return fmt.Errorf("cannot seal chunk %s: %w", w.e.key.id, ErrAlreadyHeld)
		}
		return fmt.Errorf("cannot seal chunk %s: %w", w.e.key.id, ErrNotStaged)
	}
	if err := w.hold(); err != nil {
		w.done = true
		w.dropDirect()
		return fmt.Errorf("cannot seal: %w", err)
	}
	lost, verr := w.verify()
	if verr == nil {
		if err := s.cat.health(); err != nil {
			verr = fmt.Errorf("cannot seal chunk %s: %w", w.e.key.id, err)
		}
	}
	if verr == nil {
		s.pol.settle(w.e) // the policy's decision must be known before publishing
	}

	s.mu.Lock()
	defer s.unlock()
	if lost != nil {
		s.segmentLost(w.e.slot.seg, lost)
	}
	w.e.refs--
	if w.direct {
		w.e.refs-- // the hold taken by Bytes
	}
	w.done = true
	e := w.e
	if e.state != stateStaged {
		s.maybeFree(e)
		return fmt.Errorf("cannot seal: %w", w.deadErr())
	}
	if verr != nil || e.evicted || e.rejected {
		reason := reasonAborted
		if verr == nil {
			reason = reasonPolicy
			s.st.rejections[ReasonPolicy]++
			verr = fmt.Errorf("cannot seal chunk %s: %w", e.key.id, ErrRejected)
		}
		if s.kill(e, reason) {
			s.forgetLater(e)
		}
		return verr
	}
	e.state = stateSealed
	s.unstage(e)
	s.st.chunks++
	s.st.payloadBytes += int64(e.size)
	s.st.seals++
	s.nsSealed(e, 1)
	s.cat.addChunk(s.nsNames[e.key.ns], e)
	return nil
}

// verify checks, before a seal, that the chunk's segment file is still
// there (lost, when not) and that every byte was written and matches the
// declared checksum (verr says why not).
func (w *Staged) verify() (lost, verr error) {
	var sum uint32
	// One fstat: a chunk in a file that is gone would be lost at restart.
	lost = w.e.slot.seg.checkFile()
	switch {
	case lost != nil:
		verr = fmt.Errorf("cannot seal chunk %s: %w", w.e.key.id, lost)
	case w.direct:
		var err error
		if sum, err = guardedChecksum(w.buf); err != nil {
			verr = fmt.Errorf("cannot seal chunk %s: %w: %w", w.e.key.id, ErrChecksum, err)
		}
	case w.written != int64(len(w.buf)):
		verr = fmt.Errorf("cannot seal chunk %s: %w: %d of %d bytes written", w.e.key.id, ErrIncomplete, w.written, len(w.buf))
	default:
		sum = w.crc
	}
	if verr == nil && sum != w.e.crc {
		verr = fmt.Errorf("cannot seal chunk %s: %w: bytes have %08x, expected %08x", w.e.key.id, ErrChecksum, sum, w.e.crc)
	}
	return lost, verr
}

// Abort frees the staged slot. After Seal (successful or not) or Abort it is
// a no-op.
func (w *Staged) Abort() {
	if w == nil || w.e == nil || w.done {
		return
	}
	w.done = true
	s := w.s
	if !s.enter() {
		return
	}
	defer s.exit()
	s.mu.Lock()
	defer s.unlock()
	if w.direct {
		w.e.refs--
	}
	if w.e.state == stateStaged && s.kill(w.e, reasonAborted) {
		s.forgetLater(w.e)
	}
	s.maybeFree(w.e)
}

// dropDirect releases the hold Bytes took, when Seal gives up early.
func (w *Staged) dropDirect() {
	if !w.direct {
		return
	}
	s := w.s
	s.mu.Lock()
	w.e.refs--
	s.maybeFree(w.e)
	s.mu.Unlock()
}

// put stages, copies and seals a chunk in one call, for tests that have the
// whole chunk in memory. data is only read.
func (s *Store) put(ns string, id ID, data []byte, crc uint32) error {
	w, err := s.Stage(ns, id, int64(len(data)), crc)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	return w.Seal()
}
