package trace

// Belady returns the hit ratio of the exact offline optimum for a cache of capacity
// ids, replaying reqs in the same order as Replay. On a miss with a full cache it
// considers the cached ids and the missing id itself, and drops the one whose next
// use is farthest in the future (ids never used again first): the missing id may thus
// bypass the cache, never being admitted. This is the optimum for any policy that may
// decline to store, so it bounds admission-controlled policies (TinyLFU and the like)
// as well as plain eviction policies.
//
// Belady allocates O(accesses) memory and runs in O(accesses · log capacity).
func Belady(reqs []Request, capacity int) float64 {
	hits, total := beladyHits(reqs, capacity, true)
	return ratio(int64(hits), int64(total))
}

// BeladyAdmitAll is Belady without bypass: every missing id is admitted, and the
// victim is the cached id whose next use is farthest (classic demand-paging MIN, the
// optimum among policies that store every miss). It is never above Belady.
func BeladyAdmitAll(reqs []Request, capacity int) float64 {
	hits, total := beladyHits(reqs, capacity, false)
	return ratio(int64(hits), int64(total))
}

func beladyHits(reqs []Request, capacity int, bypass bool) (hits, total int) {
	// Renumber ids densely in access order so the hot loop indexes slices, not maps.
	dense := make(map[int64]int32)
	var seq []int32
	for _, r := range reqs {
		for _, id := range r.HashIDs {
			d, ok := dense[id]
			if !ok {
				d = int32(len(dense))
				dense[id] = d
			}
			seq = append(seq, d)
		}
	}
	total = len(seq)
	if capacity <= 0 {
		return 0, total
	}
	// next[i] is the position of the next access to seq[i], or never.
	never := len(seq)
	next := make([]int, len(seq))
	last := make([]int, len(dense))
	for i := range last {
		last[i] = never
	}
	for i := len(seq) - 1; i >= 0; i-- {
		next[i] = last[seq[i]]
		last[seq[i]] = i
	}
	// held[d] is the next use of cached id d, or -1 when d is not cached. The heap
	// holds (next use, id) pairs, some stale: a pair is live when held[id] equals its
	// next use (lazy deletion).
	held := last // reuse: every entry is overwritten below
	for i := range held {
		held[i] = -1
	}
	size := 0
	h := &farthestHeap{}
	for i, d := range seq {
		nu := next[i]
		if held[d] >= 0 {
			hits++
			held[d] = nu
			h.push(useAt{nu, d})
			continue
		}
		if size >= capacity {
			victim := h.popLive(held)
			if bypass && nu >= victim.next {
				h.push(victim) // keep the cached id; do not admit this one
				continue
			}
			held[victim.id] = -1
			size--
		}
		held[d] = nu
		size++
		h.push(useAt{nu, d})
		if h.Len() > 4*capacity+64 {
			h.compact(held)
		}
	}
	return hits, total
}

type useAt struct {
	next int
	id   int32 // dense id
}

// farthestHeap is a binary max-heap on next use, typed to avoid container/heap's
// boxing in the hot loop.
type farthestHeap []useAt

func (h farthestHeap) Len() int { return len(h) }

func (h *farthestHeap) push(u useAt) {
	*h = append(*h, u)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].next >= a[i].next {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *farthestHeap) pop() useAt {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	*h = a[:n]
	h.down(0)
	return top
}

func (h farthestHeap) down(i int) {
	for {
		l, big := 2*i+1, i
		if l < len(h) && h[l].next > h[big].next {
			big = l
		}
		if r := l + 1; r < len(h) && h[r].next > h[big].next {
			big = r
		}
		if big == i {
			return
		}
		h[i], h[big] = h[big], h[i]
		i = big
	}
}

// popLive removes and returns the live entry with the farthest next use.
func (h *farthestHeap) popLive(held []int) useAt {
	for {
		if u := h.pop(); held[u.id] == u.next {
			return u
		}
	}
}

// compact drops stale entries and restores the heap order.
func (h *farthestHeap) compact(held []int) {
	live := (*h)[:0]
	for _, u := range *h {
		if held[u.id] == u.next {
			live = append(live, u)
		}
	}
	*h = live
	for i := len(live)/2 - 1; i >= 0; i-- {
		live.down(i)
	}
}
