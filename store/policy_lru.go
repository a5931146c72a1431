package store

import "sync"

// lru is the PolicyLRU policy: a doubly linked list of the chunks it holds,
// newest first, and a map from hash to list element. Decisions are
// synchronous: offer evicts the oldest chunks that are not pinned until the
// new one fits and calls onEvict for each before it returns, so settle and
// wait have nothing to wait for.
//
// Pinned chunks stay, and their cost stays counted: offer skips them (it
// reads entry.pinned), and a chunk pinned between that choice and the
// store's callback is refused by the callback and put back. So the room
// offer makes is real, and a chunk is never counted as evicted while pins
// keep its slot. When pinned chunks leave no room for the new one, nothing
// is evicted: the store's allocation then fails with ErrNoSpace.
//
// With namespace shares (setShares) the victims are chosen by
// policy_lru_shares.go instead; without, exactly as above.
type lru struct {
	onEvict  evictFunc
	onReject func(*entry)
	maxCost  int64

	mu    sync.Mutex
	used  int64
	items map[uint64]*lruItem
	head  lruItem // head.next is the newest, head.prev the oldest
	// sh is nil while no namespace has a share.
	sh *lruShares
}

type lruItem struct {
	e          *entry
	cost       int64
	prev, next *lruItem
	// evicting: unlinked and its cost uncounted while offer asks the store
	// to evict it; still in items, so forget can cancel the put-back.
	evicting bool
	// sx is the item's place in its namespace's list while shares are on
	// (nil before; kept for reuse). One pointer, so that an item stays 48
	// bytes with shares off.
	sx *lruNSNode
}

func newLRU(maxCost int64, onEvict evictFunc, onReject func(*entry)) *lru {
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

// nsLink makes it the newest of its namespace's list while shares are on
// (after pushFront); unlinkItem undoes both. l.mu held.
func (l *lru) nsLink(it *lruItem) {
	if l.sh != nil {
		l.nsPush(it)
	}
}

func (l *lru) unlinkItem(it *lruItem) {
	l.unlink(it)
	if l.sh != nil {
		l.nsUnlink(it)
	}
}

// reserve sizes the map for n chunks while it holds none (a restart offers
// every recovered chunk at once; growing the map step by step cost a
// third of the offers' time).
func (l *lru) reserve(n int) {
	l.mu.Lock()
	if len(l.items) == 0 {
		l.items = make(map[uint64]*lruItem, n)
	}
	l.mu.Unlock()
}

// offer admits e as the newest chunk, evicting the oldest unpinned chunks
// until the budget holds it. A chunk larger than the whole budget, or whose
// hash another entry holds, is rejected (through onReject) and offer still
// returns true: the decision is made.
func (l *lru) offer(e *entry, cost int64) bool {
	l.mu.Lock()
	it, known := l.items[e.hash]
	if known && it.evicting {
		delete(l.items, e.hash) // its eviction's outcome no longer matters
		known = false
	}
	switch {
	case known && it.e != e, cost > l.maxCost:
		l.mu.Unlock()
		l.onReject(e)
		return true
	case known:
		l.used += cost - it.cost
		l.unlinkItem(it)
		it.cost = cost
	default:
		it = &lruItem{e: e, cost: cost}
		l.items[e.hash] = it
		l.used += cost
	}
	l.pushFront(it)
	l.nsLink(it)
	var victims []*lruItem
	ok := true
	if l.sh != nil {
		victims, ok = l.shareVictims(it, l.used-l.maxCost)
	} else {
		victims = l.victims(it, l.used-l.maxCost)
	}
	if !ok { // over its namespace's cap, and its own chunks are pinned
		l.unlinkItem(it)
		delete(l.items, e.hash)
		l.used -= it.cost
		l.mu.Unlock()
		l.onReject(e)
		return true
	}
	l.mu.Unlock()
	l.evict(victims)
	return true
}

// reclaim evicts the oldest unpinned chunks other than keep worth cost
// bytes, whatever the budget's count says.
func (l *lru) reclaim(cost int64, keep *entry) bool {
	l.mu.Lock()
	var spare *lruItem
	if keep != nil {
		if it, ok := l.items[keep.hash]; ok && it.e == keep {
			spare = it
		}
	}
	var victims []*lruItem
	if l.sh != nil {
		victims, _ = l.shareVictims(spare, cost)
	} else {
		victims = l.victims(spare, cost)
	}
	l.mu.Unlock()
	l.evict(victims)
	return len(victims) > 0
}

// evict asks the store to evict each victim and puts back those it keeps.
// l.mu not held.
func (l *lru) evict(victims []*lruItem) {
	if len(victims) == 0 {
		return
	}
	kept := make([]bool, len(victims))
	for i, v := range victims {
		kept[i] = !l.onEvict(v.e, false)
	}
	l.mu.Lock()
	for i, v := range victims {
		if l.items[v.e.hash] != v {
			continue // forgotten or replaced meanwhile
		}
		if !kept[i] {
			delete(l.items, v.e.hash)
			continue
		}
		// Pinned after it was chosen: it stays, as the newest (a pin is a
		// lookup), and its cost counts again.
		v.evicting = false
		l.used += v.cost
		l.pushFront(v)
		l.nsLink(v)
	}
	l.mu.Unlock()
}

// victims unlinks the oldest chunks that are not pinned, other than newest,
// whose cost adds up to excess, marks them evicting and returns them. It
// takes none when pinned chunks leave too little. With shares on,
// shareVictims chooses instead. l.mu held.
func (l *lru) victims(newest *lruItem, excess int64) []*lruItem {
	if excess <= 0 {
		return nil
	}
	var picked []*lruItem
	var freed int64
	for v := l.head.prev; v != &l.head && freed < excess; v = v.prev {
		if v == newest || v.e.pinned.Load() {
			continue
		}
		picked = append(picked, v)
		freed += v.cost
	}
	if freed < excess {
		return nil
	}
	for _, v := range picked {
		l.unlink(v)
		v.evicting = true
		l.used -= v.cost
	}
	return picked
}

func (l *lru) settle(*entry) {}

func (l *lru) wait() {}

// touch makes h the newest chunk, if the policy holds it.
func (l *lru) touch(h uint64) {
	l.mu.Lock()
	if it, ok := l.items[h]; ok && !it.evicting && (l.head.next != it || l.sh != nil) {
		l.unlinkItem(it)
		l.pushFront(it)
		l.nsLink(it)
	}
	l.mu.Unlock()
}

func (l *lru) demote(h uint64) {
	l.mu.Lock()
	if it, ok := l.items[h]; ok && !it.evicting && l.sh == nil && l.head.prev != it {
		l.unlink(it)
		it.next = &l.head
		it.prev = l.head.prev
		l.head.prev.next = it
		l.head.prev = it
	}
	l.mu.Unlock()
}

func (l *lru) forget(h uint64) {
	l.mu.Lock()
	if it, ok := l.items[h]; ok {
		delete(l.items, h)
		if !it.evicting {
			l.unlinkItem(it)
			l.used -= it.cost
		}
	}
	l.mu.Unlock()
}

func (l *lru) close() {}
