package store

import (
	"errors"

	"github.com/kvring/kvring/internal/storeerr"
)

// Sentinel errors. Every error the store returns wraps one of them, with
// context naming the chunk or the field; test them with errors.Is. Those
// that cross the wire are defined in internal/storeerr, so that transfer and
// the SDK name them without linking the store; each here is that same value.
var (
	// ErrNotFound: the chunk is not held (never stored, evicted, or dropped).
	ErrNotFound = storeerr.ErrNotFound
	// ErrAlreadyHeld: the chunk is already sealed; nothing was written.
	ErrAlreadyHeld = storeerr.ErrAlreadyHeld
	// ErrBusy: another writer is staging the same chunk right now.
	ErrBusy = storeerr.ErrBusy
	// ErrRejected: the eviction policy declined to admit the chunk, or evicted
	// it before its seal. Not held; not a failure of the system.
	ErrRejected = storeerr.ErrRejected
	// ErrNoSpace: no room for the chunk: the memory budget is full (the rest
	// is staged, pinned or held by readers), writes in progress hold all
	// they may, or the shared-memory filesystem is out of space. The message
	// says which.
	ErrNoSpace = storeerr.ErrNoSpace
	// ErrInvalid: bad input (empty or oversized chunk, malformed namespace or id,
	// a write past the end of a slot, a negative pin lease) or a Config that
	// cannot work. The message names the field.
	ErrInvalid = storeerr.ErrInvalid
	// ErrNotStaged: a Write, Check or Seal of a chunk that is no longer staged
	// (sealed, aborted or refused), or on a Staged that Stage did not return.
	ErrNotStaged = storeerr.ErrNotStaged
	// ErrLeaseExpired: the staged slot's lease ran out before the seal; the slot
	// was freed.
	ErrLeaseExpired = storeerr.ErrLeaseExpired
	// ErrChecksum: the bytes do not match the checksum.
	ErrChecksum = storeerr.ErrChecksum
	// ErrIncomplete: seal of a chunk whose bytes were not all written.
	ErrIncomplete = storeerr.ErrIncomplete
	// ErrPinLimit: the pins asked for would hold more than
	// Config.MaxPinnedBytes; nothing was pinned. Retry without a pin, or
	// later.
	ErrPinLimit = storeerr.ErrPinLimit
	// ErrFault: shared memory under a chunk faulted while it was copied or
	// read: its segment file was truncated or deleted, or the filesystem
	// had no space for the page. It comes wrapped with ErrNoSpace (a write)
	// or ErrChecksum (a read: the chunk is dropped), never alone.
	ErrFault = errors.New("store: shared-memory fault")
	// ErrSegmentLost: a segment file was deleted or truncated under the
	// running store. Chunks written into it are refused at Seal (a retry
	// lands in a new segment); Health reports it while it holds chunks, which
	// a restart would not serve.
	ErrSegmentLost = storeerr.ErrSegmentLost
	// ErrInUse: a running node holds the segment directory (RemoveShmNode).
	ErrInUse = errors.New("store: in use")
	// ErrClosed: the store is closed.
	ErrClosed = storeerr.ErrClosed
	// ErrCatalog: the catalog cannot be written (Health). The chunks are
	// held and readable; their records wait and are retried, so a restart
	// before a write succeeds would not serve them again. Stage and Seal
	// refuse new chunks with it meanwhile.
	ErrCatalog = errors.New("store: catalog cannot be written")
)
