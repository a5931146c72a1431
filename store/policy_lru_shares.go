package store

// Namespace shares in the LRU policy. While no namespace has a share the
// lru keeps one list and evicts its oldest chunks, whoever they belong to
// (sh is nil and none of this runs). Once a share is set each chunk is
// also in its namespace's list, stamped with a sequence number at every
// access, and victims are chosen in this order:
//
//  1. A namespace over its cap makes room for its own write from its own
//     oldest chunks, down to its cap (and is refused when pins keep it
//     over).
//  2. The budget's excess comes from the oldest chunk, over all
//     namespaces, whose eviction leaves its namespace at or above its
//     guarantee (a namespace without one is always eligible).
//  3. When no such chunk is left, the writing namespace's own oldest
//     chunks go, below its guarantee if need be: its write displaces only
//     its own chunks, never another namespace's guaranteed ones.
//
// Choosing a victim costs one step per namespace holding chunks (the
// oldest eligible tail is found by comparing stamps).

// shareLimits is one namespace's share in bytes of this store's budget; 0
// is none.
type shareLimits struct {
	guarantee, cap int64
}

// lruShares is the per-namespace state of an lru with shares; guarded by
// lru.mu.
type lruShares struct {
	by  map[uint32]*lruNS
	seq uint64
}

// lruNS is one namespace's list (head.next the newest, head.prev the
// oldest) and the slot bytes its linked chunks cost.
type lruNS struct {
	limits shareLimits
	used   int64
	head   lruNSNode
	// picked and cursor are scratch for one victim selection.
	picked int64
	cursor *lruNSNode
}

// lruNSNode is an item's place in its namespace's list: ns is nil while it
// is in none (a blob's placeholder, or unlinked).
type lruNSNode struct {
	it         *lruItem
	ns         *lruNS
	prev, next *lruNSNode
	stamp      uint64 // sequence number of the item's last access
}

func newLRUNS(limits shareLimits) *lruNS {
	n := &lruNS{limits: limits}
	n.head.next, n.head.prev = &n.head, &n.head
	return n
}

// setShares replaces every namespace's share (by the store's namespace
// number); an empty map turns shares off, back to one shared list.
func (l *lru) setShares(m map[uint32]shareLimits) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(m) == 0 {
		l.sh = nil
		return
	}
	if l.sh != nil {
		for id, n := range l.sh.by {
			n.limits = m[id]
		}
		for id, lim := range m {
			if l.sh.by[id] == nil {
				l.sh.by[id] = newLRUNS(lim)
			}
		}
		return
	}
	l.sh = &lruShares{by: make(map[uint32]*lruNS, len(m))}
	for id, lim := range m {
		l.sh.by[id] = newLRUNS(lim)
	}
	for _, it := range l.items { // lists of an earlier time shares were on
		if it.sx != nil {
			it.sx.ns = nil
		}
	}
	for it := l.head.prev; it != &l.head; it = it.prev { // oldest first
		l.nsPush(it)
	}
}

// nsOf returns the namespace it is charged to: nil for a blob's
// placeholder, which belongs to none. l.mu held, shares on.
func (l *lru) nsOf(it *lruItem) *lruNS {
	if it.e.isPlaceholder() {
		return nil
	}
	n := l.sh.by[it.e.key.ns]
	if n == nil {
		n = newLRUNS(shareLimits{})
		l.sh.by[it.e.key.ns] = n
	}
	return n
}

// nsPush makes it the newest of its namespace and charges its cost there.
func (l *lru) nsPush(it *lruItem) {
	n := l.nsOf(it)
	if n == nil {
		return
	}
	x := it.sx
	if x == nil {
		x = &lruNSNode{it: it}
		it.sx = x
	}
	x.ns = n
	x.stamp = l.sh.seq
	l.sh.seq++
	x.prev = &n.head
	x.next = n.head.next
	n.head.next.prev = x
	n.head.next = x
	n.used += it.cost
}

// nsUnlink takes it out of its namespace's list and uncharges it.
func (l *lru) nsUnlink(it *lruItem) {
	x := it.sx
	if x == nil || x.ns == nil {
		return
	}
	x.prev.next = x.next
	x.next.prev = x.prev
	x.ns.used -= it.cost
	x.ns = nil
}

// peek returns n's oldest chunk not yet picked that may go: not pinned and
// not newest; nil when none is left.
func (n *lruNS) peek(newest *lruItem) *lruNSNode {
	for c := n.cursor; c != &n.head; c = c.prev {
		if c.it != newest && !c.it.e.pinned.Load() {
			n.cursor = c
			return c
		}
	}
	n.cursor = &n.head
	return nil
}

// take picks c, n's chunk that peek returned.
func (n *lruNS) take(c *lruNSNode) {
	n.picked += c.it.cost
	n.cursor = c.prev
}

// shareVictims chooses the victims that make room for newest (nil when
// reclaim has no entry to keep) and excess bytes of the budget, unlinks
// them and marks them evicting. ok is false when newest's namespace is
// over its cap and its own chunks cannot bring it down: newest must be
// refused. When too little may go it takes none (the store's allocation
// then fails with ErrNoSpace). l.mu held, shares on.
func (l *lru) shareVictims(newest *lruItem, excess int64) (picked []*lruItem, ok bool) {
	var own *lruNS
	if newest != nil && newest.sx != nil {
		own = newest.sx.ns
	}
	overCap := own != nil && own.limits.cap > 0 && own.used > own.limits.cap
	if excess <= 0 && !overCap {
		return nil, true
	}
	for _, n := range l.sh.by {
		n.picked, n.cursor = 0, n.head.prev
	}
	if overCap {
		for over := own.used - own.limits.cap; over > 0; {
			v := own.peek(newest)
			if v == nil {
				return nil, false
			}
			own.take(v)
			picked = append(picked, v.it)
			over -= v.it.cost
			excess -= v.it.cost
		}
	}
	for excess > 0 {
		v := l.sh.oldestOverShare(newest)
		if v == nil && own != nil {
			v = own.peek(newest)
		}
		if v == nil {
			return nil, true
		}
		v.ns.take(v)
		picked = append(picked, v.it)
		excess -= v.it.cost
	}
	for _, v := range picked {
		l.unlinkItem(v)
		v.evicting = true
		l.used -= v.cost
	}
	return picked, true
}

// oldestOverShare returns the oldest chunk, over every namespace, whose
// eviction leaves its namespace at or above its guarantee; nil for none.
func (sh *lruShares) oldestOverShare(newest *lruItem) *lruNSNode {
	var best *lruNSNode
	for _, n := range sh.by {
		c := n.peek(newest)
		if c == nil || n.used-n.picked-c.it.cost < n.limits.guarantee {
			continue
		}
		if best == nil || c.stamp < best.stamp {
			best = c
		}
	}
	return best
}
