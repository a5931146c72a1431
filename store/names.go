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
// left. It walks the whole index under the store's mutex (a 1M-chunk store
// holds it for tens of milliseconds): for SCAN, not for a data path. The
// caller owns the slice.
func (s *Store) Names(prefix string, from []byte, limit int) (out []NamedChunk, more bool) {
	if limit <= 0 || !s.enter() {
		return nil, false
	}
	defer s.exit()
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &nameHeap{}
	for _, head := range s.idx.m {
		for e := head; e != nil; e = e.next {
			if e.state != stateSealed || e.name == nil || bytes.Compare(e.key.id[:min(len(from), IDSize)], from) < 0 ||
				!strings.HasPrefix(s.nsNames[e.key.ns], prefix) {
				continue
			}
			if h.Len() < limit+1 { // one more than asked, to know whether more are left
				heap.Push(h, NamedChunk{ID: e.key.id, Name: *e.name})
			} else if bytes.Compare(e.key.id[:], (*h)[0].ID[:]) < 0 {
				(*h)[0] = NamedChunk{ID: e.key.id, Name: *e.name}
				heap.Fix(h, 0)
			}
		}
	}
	out = make([]NamedChunk, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(NamedChunk)
	}
	if len(out) > limit {
		return out[:limit], true
	}
	return out, false
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
