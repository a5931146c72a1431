package store

import "sync/atomic"

// entry states.
const (
	stateStaged uint8 = iota + 1 // slot reserved, bytes being written; not readable
	stateSealed                  // in the index, readable
	stateDead                    // removed from the index; slot freed when refs and pins reach 0
)

// entry is one chunk: staged, sealed, or dead and waiting for its readers.
// The store's mutex guards every field; the bytes of the slot belong to the
// entry's writer while staged and are immutable once sealed.
type entry struct {
	key  chunkKey
	hash uint64
	next *entry // next entry with the same hash (collision chain)
	slot slotRef
	size uint32
	crc  uint32
	// place is the key of the chunk's placement group on the ring, for a
	// namespace placed by groups (SetPlacement); nil otherwise.
	place *ID
	// name is the key a chunk written through the Redis protocol was
	// stored under (SetName); nil otherwise.
	name    *string
	state   uint8
	reason  uint8 // why a dead entry died (a reason* constant)
	hasSlot bool  // slot is allocated and not yet returned to the arena
	policy  bool  // known to the policy (offered and not yet evicted, rejected or forgotten)
	// rejected: the policy declined the entry at admission.
	rejected bool
	// evicted: the policy evicted the entry while it was staged or pinned. A
	// staged entry is then refused at seal; a pinned sealed entry stays
	// readable until its pins end, then dies.
	evicted bool
	refs    int32 // readers (Views) and active writers
	pins    int32 // pin leases
	// pinned mirrors pins > 0 for the policy, which reads it without the
	// store's mutex; written under that mutex.
	pinned atomic.Bool
}

// isPlaceholder reports whether e is a blob's placeholder in the policy
// (CreateBlob), charged to no namespace: the only entries of size 0. size
// never changes after an entry is made, so the policy may read it without
// the store's mutex.
func (e *entry) isPlaceholder() bool { return e.size == 0 }

// bytes returns the chunk's bytes in shared memory.
func (e *entry) bytes() []byte {
	return e.slot.seg.slot(e.slot.slot)[:e.size:e.size]
}

// index maps chunk keys to entries (staged or sealed). It is keyed by the
// 64-bit hash with a chain for collisions, which keeps the per-chunk overhead
// to one map slot of 16 bytes.
type index struct {
	m map[uint64]*entry
	n int
}

func newIndex() index { return index{m: make(map[uint64]*entry)} }

func (x *index) get(k chunkKey, h uint64) *entry {
	for e := x.m[h]; e != nil; e = e.next {
		if e.key == k {
			return e
		}
	}
	return nil
}

func (x *index) put(e *entry) {
	e.next = x.m[e.hash]
	x.m[e.hash] = e
	x.n++
}

func (x *index) remove(e *entry) {
	p := x.m[e.hash]
	if p == e {
		if e.next == nil {
			delete(x.m, e.hash)
		} else {
			x.m[e.hash] = e.next
		}
		e.next = nil
		x.n--
		return
	}
	for ; p != nil; p = p.next {
		if p.next == e {
			p.next = e.next
			e.next = nil
			x.n--
			return
		}
	}
}
