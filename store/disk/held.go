package disk

import "github.com/kvring/kvring/store"

// Held calls f for every chunk the tier holds (on disk or queued), with its
// payload size and the meta bytes it was offloaded with (valid during the
// call). It reads the footer of each sealed region (one read each) and
// holds no lock while f runs, so chunks offloaded or dropped meanwhile may
// be missed or listed: for the node's hand-off, not a data path.
func (t *Tier) Held(f func(ns string, id store.ID, size int64, meta []byte)) {
	type src struct {
		r    *region
		hdrs []byte
		n    int
	}
	t.mu.Lock()
	var srcs []src
	for _, seq := range t.order {
		r := t.regions[seq]
		if r.footLen == 0 {
			srcs = append(srcs, src{r: r, hdrs: append([]byte(nil), r.hdrs...), n: r.nhdrs})
			continue
		}
		r.refs++
		srcs = append(srcs, src{r: r})
	}
	var queued []recHeader
	inQueue := make(map[uint64]bool, len(t.pending))
	for k, rec := range t.pending {
		h := rec.h
		h.meta = append([]byte(nil), h.meta...)
		queued = append(queued, h)
		inQueue[k] = true
	}
	t.mu.Unlock()

	for _, s := range srcs {
		var hdrs []recHeader
		if s.hdrs == nil && s.r.footLen > 0 {
			fb := alignedBuf(s.r.footLen)
			err := t.pread(s.r, [][]byte{fb}, s.r.footOff)
			t.mu.Lock()
			s.r.refs--
			t.closeRegion(s.r)
			t.mu.Unlock()
			if err != nil {
				continue
			}
			if hdrs, err = parseFooter(fb); err != nil {
				continue
			}
		} else {
			for b, i := s.hdrs, 0; i < s.n; i++ {
				h, err := parseHeader(b)
				if err != nil {
					break
				}
				hdrs = append(hdrs, h)
				b = b[h.hlen:]
			}
		}
		for _, h := range hdrs {
			k := key(h.ns, store.ID(h.id))
			t.mu.Lock()
			l, ok := t.idx[k]
			// A record the writer placed but had not written at the
			// snapshot is listed once, from the queue.
			live := ok && l.region == s.r.seq && l.block == h.block && !inQueue[k]
			t.mu.Unlock()
			if live {
				f(h.ns, store.ID(h.id), int64(h.size), h.meta)
			}
		}
	}
	for _, h := range queued {
		f(h.ns, store.ID(h.id), int64(h.size), h.meta)
	}
}
