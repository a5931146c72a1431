package sockcoord

import (
	"context"
	"fmt"

	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/localsock"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// socketCluster serves the local socket's extensions in process, through
// the coordinator's plain API (the same code a remote engine's
// calls run: two-phase write, reads with owner fallback, limits, metrics),
// so a published blob is never copied through the network stack and, when
// this node owns the chunk, its slot becomes the chunk; a read of chunks
// this node does not hold is copied straight into the blobs handed to the
// client (coord.GetChunks).
type socketCluster struct {
	coord *coord.Coordinator
}

// New is the Cluster of the local socket's extensions, served by c. It
// does no I/O.
func New(c *coord.Coordinator) localsock.Cluster {
	return &socketCluster{coord: c}
}

// Close does nothing: the socket's calls hold nothing between them.
func (s *socketCluster) Close() error { return nil }

// RegisterNamespace registers (or checks) a namespace through the
// coordinator's plain API; its errors are domain errors.
func (s *socketCluster) RegisterNamespace(ctx context.Context, req *kvringv1.RegisterNamespaceRequest) (*kvringv1.RegisterNamespaceResponse, error) {
	return s.coord.Register(ctx, req, false)
}

// Lookup counts the leading ids held now (coord.Coordinator.Lookup).
func (s *socketCluster) Lookup(ctx context.Context, req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	return s.coord.Lookup(ctx, req)
}

// ReleaseLease ends a lookup lease's pins early; it never fails.
func (s *socketCluster) ReleaseLease(ctx context.Context, lease uint64) (bool, error) {
	return s.coord.ReleaseLease(ctx, lease), nil
}

// Publish runs the coordinator's two-phase write of blobs in process.
func (s *socketCluster) Publish(ctx context.Context, begin *kvringv1.PutBegin, blobs []*store.Blob) (localsock.PutOutcome, error) {
	epoch, results, err := s.coord.Publish(ctx, begin, blobs)
	return localsock.PutOutcome{Epoch: epoch, Results: results}, err
}

// Get reads the chunks of req through the coordinator's GetChunks in
// process, into the buffers alloc gives (sockSink), verifying each chunk's
// checksum once it is copied.
func (s *socketCluster) Get(ctx context.Context, req *kvringv1.GetRequest, alloc func(int, int64) ([]byte, error),
	done func(int, *kvringv1.ChunkHeader, bool, string)) error {
	k := &sockSink{n: len(req.GetIds()), alloc: alloc, done: done, idx: -1}
	err := s.coord.GetChunks(ctx, req, k)
	k.finish()
	return err
}

// sockSink is a local-socket read's coord.ChunkSink: it copies each found
// chunk into a buffer alloc gives (a blob a local client is handed) and
// reports every chunk's outcome to done.
type sockSink struct {
	n     int
	alloc func(int, int64) ([]byte, error)
	done  func(int, *kvringv1.ChunkHeader, bool, string)

	idx    int // the chunk being copied; -1 none
	hdr    *kvringv1.ChunkHeader
	buf    []byte // its buffer; nil when alloc failed
	filled int
}

func (k *sockSink) Found(h *kvringv1.ChunkHeader) error {
	k.finish()
	i := int(h.GetIndex())
	if i >= k.n {
		return fmt.Errorf("the node answered for chunk %d of %d", i, k.n)
	}
	buf, err := k.alloc(i, int64(h.GetChunk().GetSize()))
	if err != nil {
		k.done(i, h, false, fmt.Sprintf("no local memory for the chunk: %v", err))
		return nil
	}
	k.idx, k.hdr, k.buf, k.filled = i, h, buf, 0
	return nil
}

func (k *sockSink) Miss(i uint32, err error) error {
	k.finish()
	if int(i) >= k.n {
		return fmt.Errorf("the node answered for chunk %d of %d", i, k.n)
	}
	h := coord.MissHeader(i, err)
	k.done(int(i), h, false, fmt.Sprintf("%s: %s", h.GetStatus(), h.GetReason()))
	return nil
}

// Data copies b into the chunk's buffer: the blob was handed to a local
// client, which may truncate it, so the copy runs under a fault guard.
func (k *sockSink) Data(i uint32, off uint64, b []byte) error {
	if k.buf == nil {
		return nil // no memory for it: reported at Found
	}
	if int(i) != k.idx || off != uint64(k.filled) || k.filled+len(b) > len(k.buf) {
		return fmt.Errorf("chunk %d: bytes of chunk %d at offset %d do not follow byte %d", k.idx, i, off, k.filled)
	}
	if err := store.Guarded(func() { k.filled += copy(k.buf[k.filled:], b) }); err != nil {
		return fmt.Errorf("chunk %d: cannot write its blob: %w", k.idx, err)
	}
	return nil
}

// finish reports the chunk being copied: found when all its bytes came and
// pass their checksum.
func (k *sockSink) finish() {
	if k.idx < 0 || k.buf == nil {
		k.idx, k.buf = -1, nil
		return
	}
	switch {
	case k.filled != len(k.buf):
		k.done(k.idx, k.hdr, false, fmt.Sprintf("the stream ended after %d of %d bytes", k.filled, len(k.buf)))
	case !sumMatches(k.buf, k.hdr.GetChunk().GetCrc32C()):
		k.done(k.idx, k.hdr, false, "the bytes failed their checksum (or their memory faulted)")
	default:
		k.done(k.idx, k.hdr, true, "")
	}
	k.idx, k.buf = -1, nil
}

// sumMatches reports whether a blob's bytes, read under a fault guard,
// have the CRC-32C want (false when the memory faulted).
func sumMatches(b []byte, want uint32) bool {
	var sum uint32
	err := store.Guarded(func() { sum = store.Checksum(b) })
	return err == nil && sum == want
}
