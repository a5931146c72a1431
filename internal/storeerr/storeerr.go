// Package storeerr holds the store's sentinel errors that cross the wire:
// those transfer's error table (transfer/codes.go) maps to gRPC codes and
// back. They live here, in a leaf that imports nothing of kvring's, so that
// transfer and the SDK can name them without linking the store (bbolt,
// ristretto, the shared-memory code).
//
// package store re-exports each under the same name (store.ErrNotFound is
// storeerr.ErrNotFound, the same value), so errors.Is matches either; what
// each means, and when the store returns it, is documented there
// (store/errors.go). Messages keep the "store: " prefix. The store's
// sentinels that never cross the wire (ErrFault, ErrInUse, ErrCatalog) stay
// in store.
package storeerr

import "errors"

// Sentinel errors; see store/errors.go.
var (
	// ErrNotFound: the chunk is not held.
	ErrNotFound = errors.New("store: chunk not found")
	// ErrAlreadyHeld: the chunk is already sealed.
	ErrAlreadyHeld = errors.New("store: chunk already held")
	// ErrBusy: another writer is staging the same chunk.
	ErrBusy = errors.New("store: chunk is being written by another writer")
	// ErrRejected: the eviction policy declined the chunk.
	ErrRejected = errors.New("store: rejected by the admission policy")
	// ErrNoSpace: no room for the chunk.
	ErrNoSpace = errors.New("store: no space")
	// ErrInvalid: bad input or a Config that cannot work.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrNotStaged: the chunk is no longer staged.
	ErrNotStaged = errors.New("store: chunk is not staged")
	// ErrLeaseExpired: the staged slot's lease ran out before the seal.
	ErrLeaseExpired = errors.New("store: stage lease expired")
	// ErrChecksum: the bytes do not match the checksum.
	ErrChecksum = errors.New("store: checksum mismatch")
	// ErrIncomplete: seal of a chunk whose bytes were not all written.
	ErrIncomplete = errors.New("store: chunk bytes incomplete")
	// ErrPinLimit: the pins asked for would exceed the pin limit.
	ErrPinLimit = errors.New("store: pinned bytes would exceed the pin limit")
	// ErrSegmentLost: a segment file was deleted or truncated under the
	// running store.
	ErrSegmentLost = errors.New("store: segment file deleted or truncated")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("store: closed")
)
