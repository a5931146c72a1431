package localsock

import (
	"os"

	"github.com/kvring/kvring/store"
)

// Store is what the local socket needs of the node's store: blobs for the
// engines to fill, chunks lent in place, segment descriptors to pass, and
// the accounting it reports. *store.Store implements it. Every method is
// safe for concurrent use.
type Store interface {
	// CreateBlob reserves a slot of size bytes (1 to MaxChunkSize) for a
	// blob, its pages backed by the filesystem. The caller owns the Blob and
	// must free it. store.ErrInvalid (size), store.ErrNoSpace or
	// store.ErrClosed otherwise. It blocks while the policy evicts and the
	// kernel allocates the pages.
	CreateBlob(size int64) (*store.Blob, error)
	// Lend returns a View of a held chunk without a checksum pass, for a
	// process on this host that reads its memory itself (store.ErrNotFound
	// when not held). The caller owns the View until it releases it; the
	// slot is not freed or reused until then.
	Lend(ns string, id store.ID) (*store.View, error)
	// SegmentFile returns a duplicate of segment id's file descriptor and
	// the file's length. The caller owns the file and must close it.
	// store.ErrNotFound when the segment no longer exists.
	SegmentFile(id uint32) (*os.File, int64, error)
	// Stats returns a snapshot of the accounting. It takes the store's lock
	// briefly and asks the kernel about each segment.
	Stats() store.Stats
	// MaxChunkSize is the largest chunk (and blob) the store accepts.
	MaxChunkSize() int64
}

var _ Store = (*store.Store)(nil)
