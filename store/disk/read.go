package disk

import (
	"errors"
	"fmt"

	"github.com/kvring/kvring/internal/crc32c"
	"github.com/kvring/kvring/store"
)

// Read returns the chunk's bytes in a buffer the caller owns until it calls
// Release (once): its Bytes must not be used afterwards. A chunk still
// queued is served from the queue's copy (verified when it was queued). A
// chunk the tier does not hold is store.ErrNotFound; one whose record
// cannot be read (an I/O error, a truncated file) or does not name the
// chunk is dropped from the index, counted and reported as
// store.ErrChecksum: never wrong bytes. With verify the payload's CRC-32C is
// checked too; without it Verified is false and the caller checks Bytes
// against CRC as it copies them, calling Corrupt when they differ (one pass
// over the bytes instead of two). Hot is set when the chunk was read from
// disk before within the last Config.HotWindow or so reads. Blocks for one
// pread of the record (header and payload, block aligned).
func (t *Tier) Read(ns string, id store.ID, verify bool) (store.LowerChunk, error) {
	k := key(ns, id)
	t.mu.Lock()
	t.st.reads++
	if c, ok := t.readQueued(k, ns, id); ok {
		t.mu.Unlock()
		return c, nil
	}
	l, r, hot, err := t.locate(k, ns, id)
	t.mu.Unlock()
	if err != nil {
		return store.LowerChunk{}, err
	}
	return t.readBuffered(k, l, r, hot, ns, id, verify)
}

// locate finds chunk k's record and takes a reference on its region (the
// read that follows releases it: readRecord), marking the chunk read (its
// region's eviction writes it again, and Hot looks at it). mu held.
func (t *Tier) locate(k uint64, ns string, id store.ID) (loc, *region, bool, error) {
	l, ok := t.idx[k]
	var r *region
	if ok {
		r = t.regions[l.region]
	}
	if r == nil || r.dead || r.fd < 0 {
		return loc{}, nil, false, fmt.Errorf("chunk %s/%s on disk: %w", ns, id, store.ErrNotFound)
	}
	r.refs++
	t.idx[k] = loc{region: l.region, block: l.block, size: l.size, ns: l.ns, hlen: l.hlen | locRead}
	return l, r, t.touchHot(k), nil
}

// readBuffered reads the record at l of r into a buffer of the pool and
// serves its payload from there (Read).
func (t *Tier) readBuffered(k uint64, l loc, r *region, hot bool, ns string, id store.ID, verify bool) (store.LowerChunk, error) {
	// The blocks that hold the record: a packed one starts and ends
	// anywhere in them.
	off := recordOff(r.ver, l.block)
	start := off &^ (blockSize - 1)
	n := align(off+recordLen(r.ver, l.hdrLen(), l.size)) - start
	po := off - start + payloadOff(r.ver, l.hdrLen(), l.size)
	buf := t.bufs.get(n)
	h, err := t.readRecord(r, l, [][]byte{buf}, off-start, ns, id)
	var payload []byte
	if err == nil {
		payload = buf[po : po+int64(l.size)]
		if verify {
			if sum := crc32c.Checksum(payload); sum != h.crc {
				err = fmt.Errorf("%w: crc %08x, want %08x", errPayload, sum, h.crc)
			}
		}
	}
	if err != nil {
		t.bufs.put(buf)
		t.dropUnreadable(k, l, r.path, ns, id, err)
		return store.LowerChunk{}, fmt.Errorf("chunk %s/%s on disk: %w: %w", ns, id, store.ErrChecksum, err)
	}
	t.mu.Lock()
	t.st.hits++
	t.st.readBytes += n
	t.mu.Unlock()
	return store.LowerChunk{Bytes: payload, CRC: h.crc, Meta: h.meta, Hot: hot, Verified: verify,
		Release: func() { t.bufs.put(buf) },
		Corrupt: func(cause error) {
			t.dropUnreadable(k, l, r.path, ns, id, fmt.Errorf("%w: %w", errPayload, cause))
		}}, nil
}

// readQueued serves a chunk still in the write queue from the queue's copy.
// mu held.
func (t *Tier) readQueued(k uint64, ns string, id store.ID) (store.LowerChunk, bool) {
	rec, ok := t.pending[k]
	if !ok || rec.h.ns != ns || rec.h.id != id || rec.buf == nil {
		return store.LowerChunk{}, false
	}
	rec.refs++
	rec.read = true
	t.st.hits++
	t.st.queueHits++
	po := payloadOff(t.cfg.version(), rec.h.hlen, rec.h.size)
	b := rec.buf[po : po+int64(rec.h.size)]
	return store.LowerChunk{Bytes: b, CRC: rec.h.crc, Meta: rec.h.meta, Verified: true,
		Release: func() {
			t.mu.Lock()
			t.unref(rec)
			t.mu.Unlock()
		},
		Corrupt: func(error) {}}, true
}

// readRecord reads the blocks of the record at l of r into bufs (one
// preadv; the first holds the header, hoff bytes in) and checks that its
// header decodes and names the chunk asked for; it releases the reference
// on r Read took.
func (t *Tier) readRecord(r *region, l loc, bufs [][]byte, hoff int64, ns string, id store.ID) (recHeader, error) {
	err := t.pread(r, bufs, recordOff(r.ver, l.block)-hoff)
	t.mu.Lock()
	r.refs--
	t.closeRegion(r)
	t.mu.Unlock()
	var h recHeader
	if err == nil {
		h, err = parseHeader(bufs[0][hoff : hoff+int64(l.hdrLen())])
	}
	if err == nil && (h.ns != ns || h.id != id || h.seq != uint64(l.region) || h.block != l.block || h.size != l.size) {
		err = fmt.Errorf("%w: the record at block %d names %s/%s (%d bytes, region %d)", errFormat, l.block, h.ns, h.id[:], h.size, h.seq)
	}
	return h, err
}

// dropUnreadable drops a chunk whose record could not be read or failed a
// check, counts it and says so once in the log.
func (t *Tier) dropUnreadable(k uint64, l loc, path, ns string, id store.ID, err error) {
	t.mu.Lock()
	if cur, ok := t.idx[k]; ok && cur.same(l) {
		t.unindex(k, l)
	}
	if errors.Is(err, errFormat) || errors.Is(err, errPayload) {
		t.st.checksumErrors++
	} else {
		t.st.readErrors++ // an I/O error, or a truncated file (io.ErrUnexpectedEOF)
	}
	t.mu.Unlock()
	t.log.Warn("disk chunk could not be read and was dropped", "namespace", ns, "id", id.String(),
		"region", path, "err", err)
}

// errPayload: a record's payload does not match its checksum.
var errPayload = errors.New("disk: payload does not match its checksum")

// pread reads bufs, back to back, at off of r's file.
func (t *Tier) pread(r *region, bufs [][]byte, off int64) error {
	if f := t.faults.read; f != nil {
		if err := f(r.path); err != nil {
			return err
		}
	}
	if err := preadvFull(r.fd, bufs, off); err != nil {
		return fmt.Errorf("cannot read %d bytes at %d of %s: %w", sum(bufs), off, r.path, err)
	}
	return nil
}

// touchHot records a disk read of k and reports whether k was read before
// within the window. mu held.
func (t *Tier) touchHot(k uint64) bool {
	if t.cfg.HotWindow < 0 {
		return false
	}
	_, a := t.hotCur[k]
	_, b := t.hotPrev[k]
	if !a {
		if len(t.hotCur) >= t.cfg.HotWindow {
			t.hotPrev, t.hotCur = t.hotCur, make(map[uint64]struct{}, t.cfg.HotWindow)
		}
		t.hotCur[k] = struct{}{}
	}
	return a || b
}
