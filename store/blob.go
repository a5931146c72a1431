package store

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// Blob is a slot reserved in the shared-memory arena outside the chunk
// index and the eviction policy: the memory behind one Vineyard blob of the
// local socket. Its bytes count against the memory limit (Stats.UsedBytes,
// Stats.BlobBytes) from CreateBlob until Free; the policy never evicts it
// and a restart forgets it (blobs are not catalogued). Its (segment,
// offset) never changes while it is held, so a process on the same host
// that mapped its segment (SegmentFile) may read and write it.
//
// The bytes belong to whoever the caller says: the store never reads or
// writes them. Free is safe for concurrent use with the other methods;
// Bytes and Location may be called from any goroutine until Free.
type Blob struct {
	s     *Store
	ref   slotRef
	size  int64
	h     uint64 // the policy's placeholder for the blob
	freed bool   // guarded by s.mu
	// chunk is the entry the slot was handed to (StageChunk): the blob
	// holds a reader's reference to it. staging: StageChunk is deciding;
	// freeWanted: Free came meanwhile and StageChunk frees the blob when it
	// is done. Guarded by s.mu.
	chunk      *entry
	staging    bool
	freeWanted bool
	// sum is the checksum the last Checksum computed (summed: it ran).
	// Guarded by s.mu.
	sum    uint32
	summed bool
}

// CreateBlob reserves a slot of size bytes (1 to MaxChunkSize) for a blob
// and has the filesystem back its pages, so that writing it through any
// mapping cannot fault for lack of space. The slot's previous contents are
// not cleared. The eviction policy charges the blob as a pinned chunk of
// its slot's size (it evicts chunks to make room and never evicts the
// blob). Errors: ErrInvalid (size), ErrNoSpace (the budget or the
// filesystem has no room: the rest is blobs, pinned or staged), ErrClosed.
// It blocks while the policy evicts and the kernel allocates the pages.
func (s *Store) CreateBlob(size int64) (*Blob, error) {
	if size <= 0 || size > s.cfg.MaxChunkSize {
		return nil, fmt.Errorf("%w: blob size must be 1 to %d bytes, got %d", ErrInvalid, s.cfg.MaxChunkSize, size)
	}
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.exit()
	// The policy charges the blob like a chunk (a pinned placeholder entry,
	// never a victim), so chunks are evicted to make room for blobs and
	// the policy's budget leaves room for them.
	cost := classSize(size)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.blobs.placeholders++
	h := placeholderHash(s.blobs.placeholders)
	s.mu.Unlock()
	e := &entry{hash: h, policy: true}
	e.pinned.Store(true)
	if s.pol.offer(e, cost) {
		s.pol.wait()
	}
	s.mu.Lock()
	var r slotRef
	fresh, err := false, ErrClosed
	if !s.closed {
		r, fresh, err = s.allocReclaiming(size, nil, func() bool { return true })
	}
	if err != nil {
		s.st.rejections[ReasonNoSpace]++
		s.mu.Unlock()
		s.pol.forget(h)
		return nil, fmt.Errorf("cannot create a blob of %d bytes: %w", size, err)
	}
	b := &Blob{s: s, ref: r, size: size, h: h}
	s.blobs.count++
	s.blobs.bytes += size
	s.mu.Unlock()
	// Nothing frees the slot meanwhile: only Free does, and Close waits
	// for this call (enter). A reused slot was allocated when it was fresh.
	if fresh && !s.noFallocate.Load() {
		err := r.seg.allocate(r.slot)
		if errors.Is(err, errFallocateUnsupported) {
			s.noFallocate.Store(true)
			err = nil
		}
		if err != nil {
			b.free()
			return nil, fmt.Errorf("cannot create a blob of %d bytes: %w", size, err)
		}
	}
	if fresh {
		// Map the new pages into the store's mapping now, in one call: its
		// checksum of the blob then takes no page faults.
		s.prefault(b.Bytes())
	}
	return b, nil
}

// placeholderHash is the policy's key for the n-th blob placeholder: the
// hash of "kvring-blob-placeholder-<n>", built without fmt (a CreateBlob per
// chunk of every socket put; fmt.Sprintf was 4 % of a node's CPU in a
// profile of 256 KiB socket puts).
func placeholderHash(n uint64) uint64 {
	var b [64]byte
	return xxhash.Sum64(strconv.AppendUint(append(b[:0], "kvring-blob-placeholder-"...), n, 10))
}

// blobCounters are the live blobs and their payload bytes, guarded by the
// store's mu; placeholders numbers the policy's placeholder entries.
type blobCounters struct {
	count        int64
	bytes        int64
	placeholders uint64
}

// Size is the blob's length in bytes.
func (b *Blob) Size() int64 { return b.size }

// Bytes returns the blob's bytes in the store's own mapping, valid until
// Free or the store's Close. A local process may write them concurrently
// through its own mapping; reading them is not protected from a fault if
// that process truncates the segment file.
func (b *Blob) Bytes() []byte {
	return b.ref.seg.slot(b.ref.slot)[:b.size:b.size]
}

// Location says where the blob lives: the segment to pass (SegmentFile),
// the offset from byte 0 of its file and the file's length (map_size).
func (b *Blob) Location() Location {
	seg := b.ref.seg
	return Location{
		Segment: seg.id,
		Offset:  int64(b.ref.slot) * seg.slotSize,
		Size:    b.size,
		MapSize: segmentFileSize(seg.slotSize, seg.nslots),
	}
}

// Checksum returns the CRC-32C of the blob's bytes, reading the mapping
// under a fault guard: a segment truncated by another process is an error
// wrapping ErrFault, not a crash. One pass over the bytes (split across
// Config.ChecksumParts goroutines for a large blob when that is above 1; it
// returns when all are done); the blob remembers the sum for StageChunk.
func (b *Blob) Checksum() (uint32, error) {
	if !b.s.enter() {
		return 0, ErrClosed
	}
	defer b.s.exit()
	sum, err := guardedChecksumParts(b.Bytes(), b.s.cfg.ChecksumParts)
	if err != nil {
		return 0, fmt.Errorf("cannot checksum blob: %w", err)
	}
	b.s.mu.Lock()
	b.sum, b.summed = sum, true
	b.s.mu.Unlock()
	return sum, nil
}

// Sum returns the checksum the last Checksum call computed, and whether
// one did. It never reads the bytes, so it may be called after the blob
// was sealed into a chunk or freed.
func (b *Blob) Sum() (uint32, bool) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return b.sum, b.summed
}

// Free returns the blob's slot to the arena; its bytes must not be touched
// afterwards. Idempotent; a no-op after the store's Close (the next Open
// treats the slot as free).
func (b *Blob) Free() {
	if b == nil || !b.s.enter() {
		return
	}
	defer b.s.exit()
	b.free()
}

func (b *Blob) free() {
	s := b.s
	s.mu.Lock()
	if b.freed || s.closed {
		s.mu.Unlock()
		return
	}
	if b.staging {
		b.freeWanted = true // StageChunk frees it when it has decided
		s.mu.Unlock()
		return
	}
	forget := b.freeLocked()
	s.mu.Unlock()
	if forget {
		s.pol.forget(b.h)
	}
}

// freeLocked frees the blob: its slot, or its reference to the chunk the
// slot became. It reports whether the policy must forget the blob's
// placeholder. mu held.
func (b *Blob) freeLocked() (forgetPlaceholder bool) {
	s := b.s
	b.freed = true
	if e := b.chunk; e != nil {
		e.refs--
		s.maybeFree(e)
		return false
	}
	s.blobs.count--
	s.blobs.bytes -= b.size
	s.arena.free(b.ref)
	return true
}

// SegmentFile returns a duplicate of segment id's file descriptor, for
// passing to a process on the same host, and the file's length (the
// map_size of docs/vineyard.md). The caller owns the returned file and
// must close it. ErrNotFound when the segment no longer exists.
func (s *Store) SegmentFile(id uint32) (*os.File, int64, error) { return s.segmentFile(id) }
