package localsock

import (
	"context"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// Cluster is what the kvring extensions need from the node: its Cache
// service, called as an engine would call it. The server owns it once
// configured: Server.Close closes it after every connection has gone.
// Implementations must be safe for concurrent use; every method blocks
// until the node answers or ctx ends.
type Cluster interface {
	// RegisterNamespace registers (or checks) a namespace.
	RegisterNamespace(ctx context.Context, req *kvringv1.RegisterNamespaceRequest) (*kvringv1.RegisterNamespaceResponse, error)
	// Publish runs the two-phase write of the chunks of begin, whose bytes
	// are blobs[i] (sealed, borrowed for the call: referenced by the
	// caller until Publish returns). When this node owns a chunk the
	// blob's slot becomes the chunk (store.Blob.StageChunk). It returns
	// one result per chunk.
	Publish(ctx context.Context, begin *kvringv1.PutBegin, blobs []*store.Blob) (PutOutcome, error)
	// Lookup counts the held prefix of ids, optionally pinning it.
	Lookup(ctx context.Context, req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error)
	// ReleaseLease ends a lookup lease.
	ReleaseLease(ctx context.Context, lease uint64) (bool, error)
	// Get reads chunks: for each FOUND header it asks alloc for a buffer of
	// the chunk's size and fills it; done reports each chunk's outcome (a
	// nil buffer unless found and verified).
	Get(ctx context.Context, req *kvringv1.GetRequest, alloc func(i int, size int64) ([]byte, error),
		done func(i int, h *kvringv1.ChunkHeader, ok bool, reason string)) error
	// Close releases the connection to the node.
	Close() error
}

// PutOutcome is the result of Cluster.Publish.
type PutOutcome struct {
	Epoch   uint64
	Results []*kvringv1.PutChunkResult
}
