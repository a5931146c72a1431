package handoff

import "github.com/kvring/kvring/store"

// Store is what a Mover needs of the node's store: the list of the chunks
// it holds, their bytes to copy, and the eviction of what was handed off.
// *store.Store implements it. Every method is safe for concurrent use.
type Store interface {
	// Held lists every sealed chunk; the caller owns the slice. It copies
	// the store's index under its mutex: for a pass, not a data path.
	Held() []store.HeldChunk
	// EachHeld calls f with every chunk Held would list (one may come
	// twice), without a copy; f must not call the store. For Boot.
	EachHeld(f func(store.HeldChunk))
	// Contains reports whether the chunk is held (sealed and readable) now.
	Contains(ns string, id store.ID) bool
	// Staging reports whether a write of the chunk is staged now (it may
	// seal later).
	Staging(ns string, id store.ID) bool
	// Get returns a View of a held chunk, its checksum verified
	// (store.ErrNotFound when not held). The caller owns the View until it
	// releases it; its bytes stay valid, and the slot is not reused, until
	// then. It blocks only for one pass over the chunk's bytes.
	Get(ns string, id store.ID) (*store.View, error)
	// Evict removes a held chunk: it stops being readable at once, and its
	// slot is freed when its last View is released. A pinned chunk is
	// store.ErrBusy, one not held store.ErrNotFound.
	Evict(ns string, id store.ID) error
}

var _ Store = (*store.Store)(nil)
