package loadtest

import (
	"context"
	"fmt"
	"time"

	"github.com/kvring/kvring/client/local"
)

// SocketConfig configures a Socket backend.
type SocketConfig struct {
	// Path is the node's local socket (kvring serve --socket). Required.
	Path string
	// Namespace and Schema name the chunks. Required (Schema needs Model
	// and TokensPerChunk). ReplicationFactor and MinReplicas are those of
	// the namespace when this engine registers it first (0: the node's
	// defaults).
	Namespace                      string
	Schema                         local.Schema
	ReplicationFactor, MinReplicas uint32
	// PinTTL pins the chunks a lookup finds while the engine reads them; the
	// lease is released by the engine's next Put or Lookup. Default 0: no
	// pins.
	PinTTL time.Duration
	// CallTimeout bounds each call. Default 10s.
	CallTimeout time.Duration
}

// Socket is a Backend over one connection to a node's local socket, as an
// engine on the node's host would use it: a put creates blobs in one
// request, writes the chunks into them through the mapping and publishes
// them (sealed, then deleted, in the same request: where the node owns a
// chunk, the blob's memory becomes it); a get reads the chunks through the
// mapping (the node's own in place) and releases them. Not safe for
// concurrent use (one connection; it keeps the last lookup's lease): the
// Runner calls each backend from one goroutine.
type Socket struct {
	c      *local.Client
	ns     local.Namespace
	groups bool
	pinTTL time.Duration
	lease  uint64
}

// NewSocket connects to the socket and registers the namespace. It blocks
// until the node answers or ctx ends.
func NewSocket(ctx context.Context, cfg SocketConfig) (*Socket, error) {
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	c, err := local.Dial(ctx, local.Config{Path: cfg.Path, Timeout: cfg.CallTimeout})
	if err != nil {
		return nil, err
	}
	ns, err := c.RegisterNamespace(cfg.Namespace, cfg.Schema, cfg.ReplicationFactor, cfg.MinReplicas)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("cannot register namespace %q on %s: %w", cfg.Namespace, cfg.Path, err)
	}
	return &Socket{c: c, ns: ns, groups: cfg.Schema.ChunksPerGroup > 1, pinTTL: cfg.PinTTL}, nil
}

// groupKeys returns groups when the namespace groups chunks, else nil.
func (s *Socket) groupKeys(groups []ChunkID) [][32]byte {
	if !s.groups || len(groups) == 0 {
		return nil
	}
	return ids32(groups)
}

func ids32(ids []ChunkID) [][32]byte {
	out := make([][32]byte, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// release ends the pins of the last lookup, if any; a failure only leaves
// them to expire.
func (s *Socket) release() {
	if s.lease == 0 {
		return
	}
	_, _ = s.c.ReleaseLease(s.lease)
	s.lease = 0
}

// Lookup implements Backend.
func (s *Socket) Lookup(_ context.Context, ids, groups []ChunkID) (int, error) {
	s.release()
	r, err := s.c.Lookup(s.ns, ids32(ids), s.groupKeys(groups), uint32(s.pinTTL/time.Millisecond))
	if err != nil {
		return 0, err
	}
	s.lease = r.LeaseID
	return r.Held, nil
}

// Get implements Backend: each chunk found is copied out of the mapping
// (the runner keeps and verifies the bytes) and released.
func (s *Socket) Get(_ context.Context, ids, groups []ChunkID) ([]GetOutcome, error) {
	res, err := s.c.GetChunks(s.ns, ids32(ids), s.groupKeys(groups))
	if err != nil {
		return nil, err
	}
	out := make([]GetOutcome, len(ids))
	var release []uint64
	for i, r := range res {
		if i >= len(out) || !r.Found || r.Blob == nil {
			continue
		}
		out[i] = GetOutcome{Found: true, Data: append([]byte(nil), r.Blob.Data...)}
		release = append(release, r.BlobID)
	}
	if len(release) > 0 {
		if _, err := s.c.ReleaseAll(release); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Put implements Backend: create the blobs (one request), write each
// chunk into its blob, publish them sealed and delete them (one request).
// Chunks failed with code ABORTED (another write of the chunk held them up)
// are published once more, as the gRPC SDK's put resends them.
func (s *Socket) Put(_ context.Context, chunks []Chunk) ([]PutOutcome, error) {
	s.release()
	res, err := s.publish(chunks)
	if err != nil {
		return nil, err
	}
	var busy []int
	for i, r := range res {
		if r.Busy() {
			busy = append(busy, i)
		}
	}
	if len(busy) > 0 {
		sub := make([]Chunk, len(busy))
		for k, i := range busy {
			sub[k] = chunks[i]
		}
		if again, err := s.publish(sub); err == nil && len(again) == len(busy) {
			for k, i := range busy {
				res[i] = again[k]
			}
		}
	}
	out := make([]PutOutcome, len(chunks))
	for i := range out {
		out[i] = Failed
		if i >= len(res) {
			continue
		}
		switch res[i].Status {
		case "stored":
			out[i] = Stored
		case "already_held":
			out[i] = AlreadyHeld
		case "rejected":
			out[i] = Rejected
		}
	}
	return out, nil
}

// publish copies chunks into new blobs and publishes them sealed, deleting
// them (two requests).
func (s *Socket) publish(chunks []Chunk) ([]local.PublishResult, error) {
	sizes := make([]int64, len(chunks))
	for i, c := range chunks {
		sizes[i] = int64(len(c.Data))
	}
	blobs, err := s.c.CreateBlobs(sizes)
	if err != nil {
		return nil, err
	}
	if len(blobs) != len(chunks) {
		return nil, fmt.Errorf("create_buffers: %d blobs for %d chunks", len(blobs), len(chunks))
	}
	ids := make([][32]byte, len(chunks))
	groups := make([]ChunkID, len(chunks))
	blobIDs := make([]uint64, len(chunks))
	for i, c := range chunks {
		copy(blobs[i].Data, c.Data)
		ids[i], groups[i], blobIDs[i] = c.ID, c.Group, blobs[i].ID
	}
	return s.c.SealPublishAndDelete(s.ns, ids, blobIDs, s.groupKeys(groups))
}

// Close closes the connection.
func (s *Socket) Close() error { return s.c.Close() }
