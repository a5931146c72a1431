package disk

import (
	"fmt"

	"github.com/kvring/kvring/internal/crc32c"
	"github.com/kvring/kvring/store"
)

// reinsert puts the chunks of region v that were read since they were
// written (locRead) back into the write queue before v goes: a region is
// evicted whole, oldest first, and this gives each chunk in it that was
// used a second life in a new region, as a CLOCK gives a page a second
// chance (CacheLib Navy's reinsertion). A chunk not read since is evicted
// with its region. Each is read from v (one pread of its record) and its
// payload checked; one that fails a check is dropped and counted as any
// read would (dropUnreadable). Queued, a chunk is held as any offload is
// (Contains, Read serve it from the queue). Reinsertion stops when the
// queue is full: the offloads of shared memory come first. Writer only.
func (t *Tier) reinsert(v *region) {
	type cand struct {
		k uint64
		l loc
	}
	t.mu.Lock()
	var cands []cand
	for _, k := range v.keys {
		if l, ok := t.idx[k]; ok && l.region == v.seq && l.wasRead() {
			cands = append(cands, cand{k, l})
		}
	}
	t.mu.Unlock()
	for _, c := range cands {
		rec, err := t.readRecordAgain(v, c.k, c.l)
		if err != nil {
			t.dropUnreadable(c.k, c.l, v.path, t.nsName(c.l.ns), store.ID{}, err)
			continue
		}
		if queued, stop := t.requeue(v, c.k, rec); !queued {
			t.wbufs.put(rec.buf)
			if stop {
				return
			}
		}
	}
}

// requeue queues rec, read again from region v, in place of k's record in
// v. It is not queued when k is no longer there (removed, evicted, written
// anew meanwhile), or, with stop, when the queue has no room or the tier
// is closing. Writer only.
func (t *Tier) requeue(v *region, k uint64, rec *record) (queued, stop bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.queued+int64(len(rec.buf)) > t.cfg.QueueBytes {
		return false, true
	}
	l, ok := t.idx[k]
	if _, p := t.pending[k]; !ok || p || l.region != v.seq {
		return false, false
	}
	t.unindex(k, l)
	t.queued += int64(len(rec.buf))
	t.pending[k] = rec
	t.queue = append(t.queue, rec)
	t.qlen.Store(int64(len(t.queue)))
	t.st.reinserted++
	return true, false
}

// nsName is the namespace interned as n. mu not held.
func (t *Tier) nsName(n uint16) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(n) < len(t.nsNames) {
		return t.nsNames[n]
	}
	return ""
}

// readRecordAgain reads chunk k's record at l of region v (which the
// caller keeps open) and returns it as a record to queue, laid out in the
// format the tier writes, its payload verified.
func (t *Tier) readRecordAgain(v *region, k uint64, l loc) (*record, error) {
	off := recordOff(v.ver, l.block)
	start := off &^ (blockSize - 1)
	n := align(off+recordLen(v.ver, l.hdrLen(), l.size)) - start
	buf := t.bufs.get(n)
	defer t.bufs.put(buf)
	if err := t.pread(v, [][]byte{buf}, start); err != nil {
		return nil, err
	}
	hoff := off - start
	h, err := parseHeader(buf[hoff : hoff+int64(l.hdrLen())])
	if err == nil && (key(h.ns, store.ID(h.id)) != k || h.seq != uint64(l.region) || h.block != l.block || h.size != l.size) {
		err = fmt.Errorf("%w: the record at block %d is not the chunk indexed there", errFormat, l.block)
	}
	if err != nil {
		return nil, err
	}
	po := hoff + payloadOff(v.ver, h.hlen, h.size)
	payload := buf[po : po+int64(h.size)]
	if sum := crc32c.Checksum(payload); sum != h.crc {
		return nil, fmt.Errorf("%w: crc %08x, want %08x", errPayload, sum, h.crc)
	}
	ver := t.cfg.version()
	npo, rl := payloadOff(ver, h.hlen, h.size), recordLen(ver, h.hlen, h.size)
	nb := t.wbufs.get(align(rl))[:rl]
	copy(nb[npo:], payload)
	clear(nb[h.hlen:npo])
	clear(nb[npo+int64(h.size):])
	rec := &record{key: k, ns: l.ns, buf: nb, refs: 1,
		h: recHeader{size: h.size, crc: h.crc, id: h.id, ns: h.ns, meta: append([]byte(nil), h.meta...), hlen: h.hlen}}
	return rec, nil
}
