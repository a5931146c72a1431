package trace

// LRU simulates a least-recently-used cache of block ids with a fixed capacity in
// items. It stores no values. It is not safe for concurrent use; Access does not
// block and does O(1) work.
type LRU struct {
	capacity int
	index    map[int64]int32 // id -> slot in nodes
	nodes    []lruNode       // slot 0 is the list sentinel
}

// lruNode is an entry of a doubly linked list threaded through a slice, most
// recently used at sentinel.next.
type lruNode struct {
	id         int64
	prev, next int32
}

// NewLRU returns an empty LRU holding at most capacity ids; capacity <= 0 gives a
// cache that never hits.
func NewLRU(capacity int) *LRU {
	capacity = max(capacity, 0)
	nodes := make([]lruNode, 1, capacity+1)
	return &LRU{capacity: capacity, index: make(map[int64]int32, capacity), nodes: nodes}
}

// Len returns the number of ids held.
func (c *LRU) Len() int { return len(c.index) }

// Access looks up id, reports whether it was held, and makes it the most recently
// used id, evicting the least recently used one when the cache is full.
func (c *LRU) Access(id int64) (hit bool) {
	if c.capacity == 0 {
		return false
	}
	if slot, ok := c.index[id]; ok {
		c.unlink(slot)
		c.pushFront(slot)
		return true
	}
	var slot int32
	if len(c.index) < c.capacity {
		slot = int32(len(c.nodes))
		c.nodes = append(c.nodes, lruNode{})
	} else {
		slot = c.nodes[0].prev // least recently used
		c.unlink(slot)
		delete(c.index, c.nodes[slot].id)
	}
	c.nodes[slot].id = id
	c.index[id] = slot
	c.pushFront(slot)
	return false
}

func (c *LRU) unlink(slot int32) {
	n := &c.nodes[slot]
	c.nodes[n.prev].next = n.next
	c.nodes[n.next].prev = n.prev
}

func (c *LRU) pushFront(slot int32) {
	head := c.nodes[0].next
	c.nodes[slot].prev, c.nodes[slot].next = 0, head
	c.nodes[head].prev = slot
	c.nodes[0].next = slot
}

// Contains reports whether id is held, without making it recently used.
func (c *LRU) Contains(id int64) bool {
	_, ok := c.index[id]
	return ok
}
