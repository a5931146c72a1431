package disk

import "github.com/kvring/kvring/store"

// Offload takes a chunk the shared-memory tier evicts: it reserves room in
// the write queue, calls fill with a buffer of size bytes for the caller to
// copy the chunk into (fill returns an error when the bytes could not be
// read or do not match crc: nothing is kept), and queues the record for the
// writer goroutine. From then on the chunk is held: Contains counts it and
// Read serves it from the queue until it is on disk. It returns whether the
// tier holds the chunk (true too when it already did: nothing is written).
//
// It never blocks on I/O: when the queue holds Config.QueueBytes already,
// the tier is degraded, the chunk is too large for a region or fill fails,
// the offload is dropped and counted (Stats.Drops) and it returns false.
// fill runs on the caller's goroutine without the tier's lock; meta (at
// most 2048 bytes, opaque to the tier) is copied.
func (t *Tier) Offload(ns string, id store.ID, crc uint32, size int, meta []byte, fill func(dst []byte) error) bool {
	k := key(ns, id)
	h := recHeader{size: uint32(size), crc: crc, id: id, ns: ns}
	hlen := int64(headerLen(ns, meta))
	po := payloadOff(t.cfg.version(), int(hlen), uint32(size))
	rl := recordLen(t.cfg.version(), int(hlen), uint32(size))
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return false
	case t.has(k):
		t.st.already++
		t.mu.Unlock()
		return true
	case len(ns) > maxNS || len(meta) > maxMeta || size <= 0 || rl > t.maxRecord():
		t.st.drops[DropTooLarge]++
		t.mu.Unlock()
		return false
	case t.degraded != nil && t.cfg.Now().UnixNano() < t.retryAt:
		t.st.drops[DropDegraded]++
		t.mu.Unlock()
		return false
	case t.queued+rl > t.cfg.QueueBytes:
		t.st.drops[DropQueueFull]++
		t.mu.Unlock()
		return false
	}
	t.queued += rl
	t.mu.Unlock()

	buf := t.wbufs.get(align(rl))[:rl] // block multiples: the pool reuses them
	err := fill(buf[po : po+int64(size)])
	if err == nil {
		clear(buf[hlen:po]) // no stale bytes of another chunk on disk
		clear(buf[po+int64(size):])
		h.meta = append([]byte(nil), meta...)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.intern(ns)
	switch {
	case err != nil || !ok:
		t.queued -= rl
		t.wbufs.put(buf)
		t.st.drops[DropUnreadable]++
		if err != nil {
			t.log.Warn("chunk not offloaded: its bytes could not be read", "namespace", ns, "id", id.String(), "err", err)
		}
		return false
	case t.has(k): // offloaded by another caller meanwhile
		t.queued -= rl
		t.wbufs.put(buf)
		t.st.already++
		return true
	case t.closed:
		t.queued -= rl
		t.wbufs.put(buf)
		return false
	}
	r := &record{key: k, h: h, ns: n, buf: buf, refs: 1}
	r.h.hlen = int(hlen)
	t.pending[k] = r
	t.queue = append(t.queue, r)
	t.qlen.Store(int64(len(t.queue)))
	t.st.queuedTotal++
	select {
	case t.kick <- struct{}{}:
	default:
	}
	return true
}

// has reports whether k is indexed or queued. mu held.
func (t *Tier) has(k uint64) bool {
	if _, ok := t.idx[k]; ok {
		return true
	}
	_, ok := t.pending[k]
	return ok
}

// maxRecord is the largest record a region takes, with room for its
// header, its footer entry and the trailer.
func (t *Tier) maxRecord() int64 {
	return t.cfg.RegionSize - 3*blockSize - footerLen(maxNS+maxMeta+recHdrFixed+4)
}

// unref drops one reference to r, returning its buffer to the pool with
// the last. mu held.
func (t *Tier) unref(r *record) {
	r.refs--
	if r.refs == 0 && r.buf != nil {
		t.wbufs.put(r.buf)
		r.buf = nil
	}
}
