package spread

import "github.com/kvring/kvring/store"

// Store is what a Spreader needs of the node's store: the chunks of a hot
// group it copies to the spread set. *store.Store implements it.
type Store interface {
	// Get returns a View of a chunk this node holds, its checksum verified
	// (store.ErrNotFound when not held). The caller owns the View until it
	// releases it; its bytes stay valid, and the slot is not reused, until
	// then. Safe for concurrent use; it blocks only for one pass over the
	// chunk's bytes.
	Get(ns string, id store.ID) (*store.View, error)
}

var _ Store = (*store.Store)(nil)
