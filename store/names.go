package store

import (
	"bytes"
	"container/heap"
	"strings"
)

// NamedChunk is a chunk with a name (SetName), as Names lists it.
type NamedChunk struct {
	ID   ID
	Name string
}

// Names lists, in id order, up to limit sealed chunks with a name whose
// namespace starts with prefix and whose id is at least from (compared as a
// prefix: a shorter from starts at the first id that begins with it or
// follows it). more reports whether chunks after the last one listed are
// left. Chunks only the Lower tier holds are listed too. It walks the whole
// index under the store's mutex (a 1M-chunk store holds it for tens of
// milliseconds), and the Lower tier's chunks (Held: one footer read per
// region): for SCAN, not for a data path. The caller owns the slice.
func (s *Store) Names(prefix string, from []byte, limit int) (out []NamedChunk, more bool) {
	if limit <= 0 || !s.enter() {
		return nil, false
	}
	defer s.exit()
	h := &nameHeap{}
	s.mu.Lock()
	for _, head := range s.idx.m {
		for e := head; e != nil; e = e.next {
			if e.state != stateSealed || e.name == nil || bytes.Compare(e.key.id[:min(len(from), IDSize)], from) < 0 ||
				!strings.HasPrefix(s.nsNames[e.key.ns], prefix) {
				continue
			}
			h.offer(NamedChunk{ID: e.key.id, Name: *e.name}, limit)
		}
	}
	s.mu.Unlock()
	s.lowerNames(h, prefix, from, limit)
	out = make([]NamedChunk, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(NamedChunk)
	}
	if len(out) > limit {
		return out[:limit], true
	}
	return out, false
}

// lowerNames offers h the named chunks only the Lower tier holds.
func (s *Store) lowerNames(h *nameHeap, prefix string, from []byte, limit int) {
	if s.cfg.Lower == nil {
		return
	}
	type cand struct {
		ns string
		c  NamedChunk
	}
	var cands []cand
	s.cfg.Lower.Held(func(ns string, id ID, _ int64, meta []byte) {
		if bytes.Compare(id[:min(len(from), IDSize)], from) < 0 || !strings.HasPrefix(ns, prefix) {
			return
		}
		if _, name, ok := decodeMeta(meta); ok && name != nil {
			cands = append(cands, cand{ns, NamedChunk{ID: id, Name: *name}})
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cands {
		if k, ok, _ := s.key(c.ns, c.c.ID, false); ok {
			if e := s.idx.get(k, k.hash()); e != nil && e.state == stateSealed {
				continue // listed from shared memory
			}
		}
		h.offer(c.c, limit)
	}
}

// offer keeps c when it is among the limit+1 smallest ids seen (one more
// than asked, to know whether more are left).
func (h *nameHeap) offer(c NamedChunk, limit int) {
	if h.Len() < limit+1 {
		heap.Push(h, c)
	} else if bytes.Compare(c.ID[:], (*h)[0].ID[:]) < 0 {
		(*h)[0] = c
		heap.Fix(h, 0)
	}
}

// nameHeap is a max-heap by id: the largest of the smallest ids seen on top.
type nameHeap []NamedChunk

func (h nameHeap) Len() int           { return len(h) }
func (h nameHeap) Less(i, j int) bool { return bytes.Compare(h[i].ID[:], h[j].ID[:]) > 0 }
func (h nameHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nameHeap) Push(x any)        { *h = append(*h, x.(NamedChunk)) }
func (h *nameHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
