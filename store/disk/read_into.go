package disk

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/store"
)

// intoMax is the largest payload SizeInto offers to read straight into the
// caller's memory. A larger one is read into the tier's buffer and copied
// with its checksum in the same pass (Read, then the store's copy): on
// the development VM a 2 MiB O_DIRECT read into a shared-memory slot took
// 1.4-1.6x the time of a plain read of the same size into Go memory, the
// tier's read into its reused buffer 1.0-1.2x (a virtio disk taking at
// most 254 segments a request: 2 MiB of scattered 4 KiB tmpfs pages is
// three requests). Paired, the copy path took 0.65-1.08x the direct
// one's time at 2 MiB, 0.93-1.02x at 256 KiB (BenchmarkPromotePaths).
const intoMax uint32 = 1 << 20

// SizeInto returns the payload bytes of a chunk on disk whose payload
// sits at a block boundary and is at most intoMax bytes (ReadInto reads it
// without a copy); false for any other (not held, queued, a smaller or a
// larger record). Never blocks on I/O.
func (t *Tier) SizeInto(ns string, id store.ID) (int64, bool) { return t.sizeInto(ns, id, intoMax) }

// sizeInto is SizeInto with limit in place of intoMax.
func (t *Tier) sizeInto(ns string, id store.ID, limit uint32) (int64, bool) {
	k := key(ns, id)
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.idx[k]
	if !ok {
		return 0, false
	}
	r := t.regions[l.region]
	if r == nil || payloadOff(r.ver, l.hdrLen(), l.size)%blockSize != 0 || l.size > limit {
		return 0, false
	}
	return int64(l.size), true
}

// ReadInto reads the chunk's payload into dst, which must be exactly its
// size (SizeInto), and returns its checksum and meta with Bytes = dst, not
// verified: the caller checks dst against CRC and calls Corrupt when they
// differ. A record whose payload sits at a block boundary (version 2,
// alignedPayloadMin bytes or more) lands in a block-aligned dst straight
// from the disk, in one preadv with its header block (and the payload's
// last partial block, copied): no copy of the payload and no pass over it.
// Any other record is read as Read does and copied into dst. Errors are
// Read's; a dst the kernel cannot write (a shared-memory segment lost
// under the caller) is an error that drops nothing. Release is a no-op.
func (t *Tier) ReadInto(ns string, id store.ID, dst []byte) (store.LowerChunk, error) {
	k := key(ns, id)
	t.mu.Lock()
	t.st.reads++
	if c, ok := t.readQueued(k, ns, id); ok {
		t.mu.Unlock()
		return copyInto(c, dst)
	}
	l, r, hot, err := t.locate(k, ns, id)
	t.mu.Unlock()
	if err != nil {
		return store.LowerChunk{}, err
	}
	po := payloadOff(r.ver, l.hdrLen(), l.size)
	if len(dst) != int(l.size) || po%blockSize != 0 || (t.direct && !blockAligned(dst)) {
		c, err := t.readBuffered(k, l, r, hot, ns, id, false)
		if err != nil {
			return c, err
		}
		return copyInto(c, dst)
	}
	return t.readDirect(k, l, r, hot, ns, id, dst, po)
}

// readDirect reads the record at l of r with its payload straight into
// dst (ReadInto).
func (t *Tier) readDirect(k uint64, l loc, r *region, hot bool, ns string, id store.ID, dst []byte, po int64) (store.LowerChunk, error) {
	hb := t.bufs.get(po)
	defer t.bufs.put(hb)
	main := len(dst) &^ (blockSize - 1)
	bufs := [][]byte{hb, dst[:main]}
	var tb []byte
	if main < len(dst) {
		tb = t.bufs.get(blockSize)
		defer t.bufs.put(tb)
		bufs = append(bufs, tb)
	}
	h, err := t.readRecord(r, l, bufs, 0, ns, id)
	if errors.Is(err, unix.EFAULT) {
		return store.LowerChunk{}, fmt.Errorf("chunk %s/%s on disk: cannot read into the memory given: %w", ns, id, err)
	}
	if err != nil {
		t.dropUnreadable(k, l, r.path, ns, id, err)
		return store.LowerChunk{}, fmt.Errorf("chunk %s/%s on disk: %w: %w", ns, id, store.ErrChecksum, err)
	}
	copy(dst[main:], tb)
	t.mu.Lock()
	t.st.hits++
	t.st.readBytes += po + int64(main) + int64(len(tb))
	t.mu.Unlock()
	return store.LowerChunk{Bytes: dst, CRC: h.crc, Meta: append([]byte(nil), h.meta...), Hot: hot,
		Release: func() {},
		Corrupt: func(cause error) {
			t.dropUnreadable(k, l, r.path, ns, id, fmt.Errorf("%w: %w", errPayload, cause))
		}}, nil
}

// copyInto copies a chunk read into the tier's memory into dst and
// releases it: ReadInto's answer for records it cannot read into dst.
func copyInto(c store.LowerChunk, dst []byte) (store.LowerChunk, error) {
	defer c.Release()
	if len(dst) != len(c.Bytes) {
		return store.LowerChunk{}, fmt.Errorf("%w: a buffer of %d bytes for a chunk of %d", store.ErrInvalid, len(dst), len(c.Bytes))
	}
	copy(dst, c.Bytes)
	c.Bytes, c.Meta, c.Verified = dst, append([]byte(nil), c.Meta...), false
	c.Release = func() {}
	return c, nil
}

// blockAligned reports whether b starts at a block boundary, as O_DIRECT
// needs of the memory it reads into.
func blockAligned(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))&(blockSize-1) == 0
}
