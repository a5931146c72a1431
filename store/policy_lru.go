package store

import "sync"

// lru is the PolicyLRU policy: a doubly linked list of the chunks it holds,
// newest first, and a map from hash to list element. Decisions are
// synchronous: offer evicts the oldest chunks until the new one fits and
// calls onEvict for each before it returns, so settle and wait have nothing
// to wait for.
type lru struct {
	onEvict, onReject func(*entry)
	maxCost           int64

	mu    sync.Mutex
	used  int64
	items map[uint64]*lruItem
	head  lruItem // head.next is the newest, head.prev the oldest
}

type lruItem struct {
	e          *entry
	cost       int64
	prev, next *lruItem
}

func newLRU(maxCost int64, onEvict, onReject func(*entry)) *lru {
	l := &lru{onEvict: onEvict, onReject: onReject, maxCost: maxCost, items: make(map[uint64]*lruItem)}
	l.head.next, l.head.prev = &l.head, &l.head
	return l
}

func (l *lru) unlink(it *lruItem) {
	it.prev.next = it.next
	it.next.prev = it.prev
}

func (l *lru) pushFront(it *lruItem) {
	it.prev = &l.head
	it.next = l.head.next
	l.head.next.prev = it
	l.head.next = it
}

// offer admits e as the newest chunk, evicting the oldest until the budget
// holds it. A chunk larger than the whole budget, or whose hash another
// entry holds, is rejected (through onReject) and offer still returns true:
// the decision is made.
func (l *lru) offer(e *entry, cost int64) bool {
	l.mu.Lock()
	it, known := l.items[e.hash]
	switch {
	case known && it.e != e, cost > l.maxCost:
		l.mu.Unlock()
		l.onReject(e)
		return true
	case known:
		l.used += cost - it.cost
		it.cost = cost
		l.unlink(it)
	default:
		it = &lruItem{e: e, cost: cost}
		l.items[e.hash] = it
		l.used += cost
	}
	l.pushFront(it)
	var victims []*entry
	for l.used > l.maxCost {
		v := l.head.prev
		l.unlink(v)
		delete(l.items, v.e.hash)
		l.used -= v.cost
		victims = append(victims, v.e)
	}
	l.mu.Unlock()
	for _, v := range victims {
		l.onEvict(v)
	}
	return true
}

func (l *lru) settle(*entry) {}

func (l *lru) wait() {}

// touch makes h the newest chunk, if the policy holds it.
func (l *lru) touch(h uint64) {
	l.mu.Lock()
	if it, ok := l.items[h]; ok && l.head.next != it {
		l.unlink(it)
		l.pushFront(it)
	}
	l.mu.Unlock()
}

func (l *lru) forget(h uint64) {
	l.mu.Lock()
	if it, ok := l.items[h]; ok {
		l.unlink(it)
		delete(l.items, h)
		l.used -= it.cost
	}
	l.mu.Unlock()
}

func (l *lru) close() {}
