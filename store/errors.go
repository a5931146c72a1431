package store

import "errors"

// Sentinel errors. Every error the store returns wraps one of them, with
// context naming the chunk or the field; test them with errors.Is.
var (
	// ErrNotFound: the chunk is not held (never stored, evicted, or dropped).
	ErrNotFound = errors.New("store: chunk not found")
	// ErrAlreadyHeld: the chunk is already sealed; nothing was written.
	ErrAlreadyHeld = errors.New("store: chunk already held")
	// ErrBusy: another writer is staging the same chunk right now.
	ErrBusy = errors.New("store: chunk is being written by another writer")
	// ErrRejected: the eviction policy declined to admit the chunk, or evicted
	// it before its seal. Not held; not a failure of the system.
	ErrRejected = errors.New("store: rejected by the admission policy")
	// ErrNoSpace: no room for the chunk: the memory budget is full (the rest
	// is staged, pinned or held by readers), writes in progress hold all
	// they may, or the shared-memory filesystem is out of space. The message
	// says which.
	ErrNoSpace = errors.New("store: no space")
	// ErrInvalid: bad input (empty or oversized chunk, malformed namespace or id,
	// a write past the end of a slot, a negative pin lease) or a Config that
	// cannot work. The message names the field.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrNotStaged: a Write, Check or Seal of a chunk that is no longer staged
	// (sealed, aborted or refused), or on a Staged that Stage did not return.
	ErrNotStaged = errors.New("store: chunk is not staged")
	// ErrLeaseExpired: the staged slot's lease ran out before the seal; the slot
	// was freed.
	ErrLeaseExpired = errors.New("store: stage lease expired")
	// ErrChecksum: the bytes do not match the checksum.
	ErrChecksum = errors.New("store: checksum mismatch")
	// ErrIncomplete: seal of a chunk whose bytes were not all written.
	ErrIncomplete = errors.New("store: chunk bytes incomplete")
	// ErrPinLimit: the pins asked for would hold more than
	// Config.MaxPinnedBytes; nothing was pinned. Retry without a pin, or
	// later.
	ErrPinLimit = errors.New("store: pinned bytes would exceed the pin limit")
	// ErrFault: shared memory under a chunk faulted while it was copied or
	// read: its segment file was truncated or deleted, or the filesystem
	// had no space for the page. It comes wrapped with ErrNoSpace (a write)
	// or ErrChecksum (a read: the chunk is dropped), never alone.
	ErrFault = errors.New("store: shared-memory fault")
	// ErrSegmentLost: a segment file was deleted or truncated under the
	// running store. Chunks written into it are refused at Seal (a retry
	// lands in a new segment); Health reports it while it holds chunks, which
	// a restart would not serve.
	ErrSegmentLost = errors.New("store: segment file deleted or truncated")
	// ErrInUse: a running node holds the segment directory (RemoveShmNode).
	ErrInUse = errors.New("store: in use")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("store: closed")
	// ErrCatalog: the catalog cannot be written (Health). The chunks are
	// held and readable; their records wait and are retried, so a restart
	// before a write succeeds would not serve them again.
	ErrCatalog = errors.New("store: catalog cannot be written")
)
