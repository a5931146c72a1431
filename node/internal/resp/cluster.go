package resp

import (
	"context"
	"time"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// Cluster is what the server needs from the node: its coordinator, called
// as an engine's calls are (the same two-phase write, lookups and reads with
// owner fallback). Implementations must be safe for concurrent use; every
// method blocks until the cluster answered or ctx ends.
type Cluster interface {
	// Namespace returns the namespace called name. An unknown one is
	// registered first when create is true (with the schema the server
	// gives RESP namespaces), else it is ErrNoNamespace. A namespace that
	// cannot be created because the node holds as many as it may is an
	// error wrapping ErrNamespaceLimit.
	Namespace(ctx context.Context, name string, create bool) (Namespace, error)
	// Publish runs the two-phase write of one chunk per key, whose bytes
	// are blobs[i] (sealed, borrowed for the call; this node's share of a
	// chunk it owns becomes the blob's slot). One result per key.
	Publish(ctx context.Context, ns Namespace, keys []Key, blobs []*store.Blob) ([]*kvringv1.PutChunkResult, error)
	// Kept reports whether a write of k would change nothing: its chunk is
	// stored already as its namespace asks (for instance: the namespace
	// keeps one copy, this node is the key's owner and holds it sealed),
	// so SET need not even read the value. It must not block; false when
	// it cannot tell. sum is the CRC-32C of the bytes held (0: unknown), so
	// a SET of other bytes is told that the key holds others.
	Kept(k Key) (sum uint32, kept bool)
	// Known returns the namespace called name when this node's registry
	// knows it. It never blocks and never asks another member.
	Known(name string) (Namespace, bool)
	// Held reports, per key, whether a read can return its chunk and those
	// of the siblings it needs (Probe.Pin) now. A
	// key not held that a member which did not answer may hold (down,
	// timed out, declared dead lately) makes it an error wrapping
	// transfer.ErrUnavailable and naming the member: false means that every
	// member that may hold it said that it does not. With lease > 0 the
	// holders pin what they report held for that long (at most the node's
	// largest pin lease), with each probe's Pin keys that are held, so a
	// GET within it finds them.
	Held(ctx context.Context, ns Namespace, keys []Probe, lease time.Duration) ([]bool, error)
	// Get reads the chunks of keys with owner fallback; each is called once
	// per key, in order, with the verified bytes (each's to keep: Get does
	// not reuse them), or nil data and nil err for a miss (every member
	// that may hold it said that it does not), or err (wrapping
	// transfer.ErrUnavailable, naming the member) when a member that may
	// hold it did not answer or was declared dead lately.
	Get(ctx context.Context, ns Namespace, keys []Key, each func(i int, data []byte, err error) error) error
	// Delete removes the chunks of keys from every member that holds them
	// and reports, per key, whether some member held it.
	Delete(ctx context.Context, ns Namespace, keys []Key) ([]bool, error)
	// Scan returns a page of at least count key names (fewer only at the
	// end), the names of chunks written through this port, and the cursor
	// of the next page (0 after the last). Cursor 0 starts a scan. local
	// limits it to the chunks this node holds (Redis Cluster mode, where
	// SCAN is per node); otherwise it walks every member in turn. A name
	// may be listed twice (by two holders, or around a ring change).
	Scan(ctx context.Context, cursor uint64, count int, local bool) (names [][]byte, next uint64, err error)
	// Flush removes every namespace whose name starts with NamespacePrefix
	// from every member, and reports how many it removed.
	Flush(ctx context.Context) (int, error)
	// Authenticate checks a token: the access it grants, or ErrBadToken.
	Authenticate(token string) (Access, error)
	// Slots is the slot table of the current ring, for Redis Cluster mode
	// (Config.ClusterMode). It must not block.
	Slots() *SlotTable
	// SlotPlace is the placement key of slot s in namespace ns: a key whose
	// ring partition is the one slot s stands for, so that every key of a
	// slot has the owners the slot table gives it. Only Redis Cluster mode
	// asks. It must not block for long.
	SlotPlace(namespace string, s uint16) store.ID
	// Anonymous is the access of a connection that has not authenticated,
	// and whether it must AUTH before other commands.
	Anonymous() (a Access, authRequired bool)
}

// Namespace is a registered namespace as the server uses it.
type Namespace struct {
	Ref   *kvringv1.NamespaceRef
	Store string // the store's name for it (namespace.StoreName)
}

// Access is what an authenticated client may do.
type Access struct {
	// Admin may run FLUSHDB and CONFIG SET.
	Admin bool
	// Allows reports whether a namespace may be read and written; nil
	// allows every namespace.
	Allows func(namespace string) bool
	// Name names the token in logs (never the token itself).
	Name string
}

func (a Access) allows(ns string) bool { return a.Allows == nil || a.Allows(ns) }
