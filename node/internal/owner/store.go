package owner

import (
	"time"

	"github.com/kvring/kvring/store"
)

// Store is what an Owner needs of the node's store: staging and sealing
// writes, reads, pins, and removal. *store.Store implements it; the rest
// of the store (its lifecycle, catalog records, statistics, blobs) is the
// node's. Every method is safe for concurrent use.
type Store interface {
	// StageFor reserves a slot for chunk (ns, id) of size bytes whose CRC-32C
	// is crc. The caller owns the Staged and must seal or abort it; the
	// store frees the slot itself when its lease expires. Errors wrap
	// store.ErrInvalid, ErrAlreadyHeld, ErrBusy, ErrRejected, ErrNoSpace or
	// ErrClosed. It may block while the eviction policy makes room.
	// Client is charged the slot in its share of the staged-bytes budget
	// ("": the node's own work, charged to no share).
	StageFor(client, ns string, id store.ID, size int64, crc uint32) (*store.Staged, error)
	// Staging reports whether a write of (ns, id) is staged now.
	Staging(ns string, id store.ID) bool
	// Contains reports whether the chunk is held (sealed and readable) now.
	Contains(ns string, id store.ID) bool
	// HeldChecksum is the CRC-32C of a chunk held in shared memory (ok
	// false when it is not, or only in the disk tier). It never blocks
	// for long.
	HeldChecksum(ns string, id store.ID) (sum uint32, ok bool)
	// FlushCatalog writes queued catalog changes now. Blocks on the disk.
	FlushCatalog() error
	// MaxChunkSize is the largest chunk the store accepts.
	MaxChunkSize() int64

	// Get returns a View of a held chunk, its checksum verified
	// (store.ErrNotFound when not held, ErrChecksum when its bytes fail).
	// The caller owns the View until it releases it; its bytes stay valid,
	// and the slot is not reused, until then. It blocks only for one pass
	// over the chunk's bytes.
	Get(ns string, id store.ID) (*store.View, error)
	// Lend is Get without the checksum pass, for a reader that verifies the
	// bytes as it copies them. Ownership as for Get.
	Lend(ns string, id store.ID) (*store.View, error)
	// HasFor reports for each id whether it is held now and, with pinFor > 0,
	// pins the held ones until Release(pin) or the lease ends (pin 0: none
	// pinned; store.ErrPinLimit: none pinned, too many bytes). The caller
	// owns held. Client's pins are charged to its share of the pinned-bytes
	// budget (store.ErrPinLimit past it; "": no share). It never blocks on
	// I/O.
	HasFor(client, ns string, ids []store.ID, pinFor time.Duration) (held []bool, pin store.PinID, err error)
	// Release ends a pin lease; false when it was unknown or had expired.
	Release(pin store.PinID) bool

	// Names lists, in id order, up to limit sealed chunks with a name
	// (Staged.SetName) of namespaces starting with prefix whose id is at
	// least from; more reports whether others follow. It walks the index
	// under the store's mutex: for SCAN, not a data path.
	Names(prefix string, from []byte, limit int) (out []store.NamedChunk, more bool)
	// Evict removes a held chunk: it stops being readable at once, and its
	// slot is freed when its last View is released. A pinned chunk is
	// store.ErrBusy, one not held store.ErrNotFound.
	Evict(ns string, id store.ID) error
	// Delete is Evict of a pinned chunk too (its slot is freed when its
	// pins end): a client's explicit removal.
	Delete(ns string, id store.ID) error
	// DropNamespace removes every sealed chunk of ns and returns what it
	// freed; readers holding a View keep its bytes until they release it.
	DropNamespace(ns string) (store.NamespaceUsage, error)
}

var _ Store = (*store.Store)(nil)
