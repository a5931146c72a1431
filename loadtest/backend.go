package loadtest

import (
	"context"

	"github.com/kvring/kvring/client"
)

// ChunkID names a chunk; it is the SDK's id type.
type ChunkID = client.ChunkID

// Chunk is one chunk to store. Data is only read, and only during Put.
type Chunk struct {
	ID   ChunkID
	Data []byte
	// Group is the chunk's placement group key (client.GroupKeys); a
	// backend that does not place by groups ignores it.
	Group ChunkID
}

// PutOutcome is the fate of one chunk given to Backend.Put. It is the SDK's
// client.PutStatus, whose String gives the names reports use: "stored",
// "already_held", "rejected" and "failed"; Held says whether the backend
// holds the chunk after the put (Stored or AlreadyHeld).
type PutOutcome = client.PutStatus

const (
	// Stored: the backend acknowledged holding the chunk now.
	Stored = client.Stored
	// AlreadyHeld: the backend held the chunk before the put.
	AlreadyHeld = client.AlreadyHeld
	// Rejected: the backend declined the chunk (admission policy, budget).
	Rejected = client.Rejected
	// Failed: the backend could not store the chunk.
	Failed = client.Failed
)

// GetOutcome is one chunk read back. Data, when Found, is valid until the
// backend's next Get (a backend may read into buffers it reuses, as an engine
// reads into its KV buffers); a caller that keeps it copies it.
type GetOutcome struct {
	Found bool
	Data  []byte
}

// Backend is the cache under test, as one engine sees it. The Runner calls
// one Backend from one goroutine at a time; an implementation used by several
// engines at once must be safe for concurrent use. Every method blocks until
// the backend answers or ctx ends.
type Backend interface {
	// Lookup returns how many leading ids the backend holds now. groups[i]
	// is the placement group key of ids[i] (see Chunk.Group).
	Lookup(ctx context.Context, ids, groups []ChunkID) (held int, err error)
	// Get reads ids and returns one outcome per id, in order. The error is
	// non-nil only when the call as a whole failed. groups as for Lookup.
	Get(ctx context.Context, ids, groups []ChunkID) ([]GetOutcome, error)
	// Put stores chunks and returns one outcome per chunk, in order. The
	// error is non-nil only when the call as a whole failed; then no chunk
	// counts as stored. The chunks' bytes are the caller's again once Put
	// returns (the runner reuses them): copy what must be kept.
	Put(ctx context.Context, chunks []Chunk) ([]PutOutcome, error)
	// Close releases the backend's resources.
	Close() error
}
