package localsock

import (
	"fmt"
	"sync"

	"github.com/kvring/kvring/store"
)

// emptyBlobID is the id of Vineyard's empty blob (size 0), which always
// exists and has no memory.
const emptyBlobID uint64 = 1 << 63

// isBlobID reports whether id names a blob (bit 63 set).
func isBlobID(id uint64) bool { return id&(1<<63) != 0 }

// objectName is the name of an object id in metadata trees.
func objectName(id uint64) string { return fmt.Sprintf("o%016x", id) }

// blob is one Vineyard blob: a store.Blob a client created, or a chunk this
// node holds handed out by kvring_get (a store.View, read only). The table's
// mutex guards every field but the immutable id, size, mem and view.
type blob struct {
	id   uint64
	size int64
	mem  *store.Blob // created blobs and chunks fetched from other nodes
	view *store.View // a chunk this node holds

	sealed  bool
	refs    int   // references held by connections, summed
	deleted bool  // no longer visible; freed when refs reach 0
	creator *conn // the connection that created it, while it is unsealed
	// charged is the client its size is charged to in the unsealed-blob
	// budget, while it is unsealed ("": not charged).
	charged string
	freed   bool
}

// location says where the blob's bytes are.
func (b *blob) location() store.Location {
	switch {
	case b.mem != nil:
		return b.mem.Location()
	case b.view != nil:
		return b.view.Location()
	}
	return store.Location{}
}

// metaObject is a metadata tree (create_data).
type metaObject struct {
	id       uint64
	tree     map[string]any
	typename string
	persist  bool
}

// table is the server's object table. All fields are guarded by mu; blob
// memory is freed under mu (the store never calls back into the table).
type table struct {
	mu       sync.Mutex
	nextBlob uint64
	nextObj  uint64
	blobs    map[uint64]*blob
	objs     map[uint64]*metaObject
	names    map[string]uint64
	// namesChanged is closed and replaced whenever a name is put.
	namesChanged chan struct{}
	// shares is the budget of unsealed blobs, per client (shares.go).
	shares unsealedShares
}

func newTable(maxUnsealed int64) *table {
	return &table{shares: newUnsealedShares(maxUnsealed), blobs: make(map[uint64]*blob), objs: make(map[uint64]*metaObject),
		names: make(map[string]uint64), namesChanged: make(chan struct{}), nextBlob: 1, nextObj: 1}
}

// addBlob registers a new blob created by c (nil: by the server, sealed)
// and gives c one reference to it. mu held.
func (t *table) addBlob(c *conn, mem *store.Blob, view *store.View, size int64, sealed bool) *blob {
	b := &blob{id: emptyBlobID | t.nextBlob, size: size, mem: mem, view: view, sealed: sealed}
	t.nextBlob++
	t.blobs[b.id] = b
	if !sealed {
		b.creator = c
		c.created[b.id] = b
	}
	t.addRef(c, b)
	return b
}

// lookupBlob returns a visible blob (not deleted). mu held.
func (t *table) lookupBlob(id uint64) *blob {
	b := t.blobs[id]
	if b == nil || b.deleted {
		return nil
	}
	return b
}

func (t *table) addRef(c *conn, b *blob) {
	b.refs++
	c.refs[b.id]++
}

// dropRefs drops n of c's references to b (all of them when n < 0) and
// frees b if it is deleted and unreferenced. mu held.
func (t *table) dropRefs(c *conn, b *blob, n int) {
	have := c.refs[b.id]
	if n < 0 || n > have {
		n = have
	}
	if have-n == 0 {
		delete(c.refs, b.id)
	} else {
		c.refs[b.id] = have - n
	}
	b.refs -= n
	t.maybeFree(b)
}

// deleteBlob hides b and frees it once unreferenced. mu held.
func (t *table) deleteBlob(b *blob) {
	b.deleted = true
	t.unsealed(b)
	t.maybeFree(b)
}

// unsealed ends b's time as its creator's unsealed blob (sealed or
// deleted): it leaves the creator's list and gives its charge back. mu held.
func (t *table) unsealed(b *blob) {
	if b.creator != nil {
		delete(b.creator.created, b.id)
		b.creator = nil
	}
	if b.charged != "" {
		t.shares.give(b.charged, b.size)
		b.charged = ""
	}
}

func (t *table) maybeFree(b *blob) {
	if !b.deleted || b.refs > 0 || b.freed {
		return
	}
	b.freed = true
	delete(t.blobs, b.id)
	if b.mem != nil {
		b.mem.Free()
	}
	if b.view != nil {
		b.view.Release()
	}
}

// forget is a connection going away: its unsealed blobs are deleted and its
// references dropped. mu held.
func (t *table) forget(c *conn) {
	for _, b := range c.created {
		t.deleteBlob(b)
	}
	for id := range c.refs {
		if b := t.blobs[id]; b != nil {
			t.dropRefs(c, b, -1)
		}
	}
	clear(c.refs)
}

// closeAll frees every blob (Close, after every connection has gone).
func (t *table) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range t.blobs {
		b.refs = 0
		t.deleteBlob(b)
	}
}
