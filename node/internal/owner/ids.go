package owner

import (
	"fmt"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// ParseIDs checks a request's ids: at most maxBatch, each 32 bytes. The
// error names the position.
func ParseIDs(raw [][]byte, maxBatch int) ([]store.ID, error) {
	if len(raw) > maxBatch {
		return nil, fmt.Errorf("%w: %d ids in one call, more than the limit %d", transfer.ErrInvalidArgument, len(raw), maxBatch)
	}
	ids := make([]store.ID, len(raw))
	for i, b := range raw {
		id, err := store.ParseID(b)
		if err != nil {
			return nil, fmt.Errorf("%w: ids[%d]: must be %d bytes, got %d", transfer.ErrInvalidArgument, i, store.IDSize, len(b))
		}
		ids[i] = id
	}
	return ids, nil
}

// MaxNameLen is the longest ChunkRef.name: the key of a value written
// through the Redis protocol.
const MaxNameLen = 1024

// ValidateChunks checks a batch's descriptors: ids of 32 bytes, sizes within
// (0, maxChunk], names of at most MaxNameLen bytes, at most maxBatch chunks,
// no id twice. The error names the chunk index and the field.
func ValidateChunks(chunks []*kvringv1.ChunkRef, maxChunk int64, maxBatch int) ([]store.ID, error) {
	if len(chunks) == 0 {
		return nil, fmt.Errorf("%w: the batch has no chunks", transfer.ErrInvalidArgument)
	}
	if len(chunks) > maxBatch {
		return nil, fmt.Errorf("%w: %d chunks in one call, more than the limit %d", transfer.ErrInvalidArgument, len(chunks), maxBatch)
	}
	ids := make([]store.ID, len(chunks))
	first := make(map[store.ID]int, len(chunks))
	for i, c := range chunks {
		id, err := store.ParseID(c.GetId())
		if err != nil {
			return nil, fmt.Errorf("%w: chunks[%d].id: must be %d bytes, got %d", transfer.ErrInvalidArgument, i, store.IDSize, len(c.GetId()))
		}
		if c.GetSize() == 0 || int64(c.GetSize()) > maxChunk {
			return nil, fmt.Errorf("%w: chunks[%d].size: %d bytes is outside (0, %d]", transfer.ErrInvalidArgument, i, c.GetSize(), maxChunk)
		}
		if len(c.GetName()) > MaxNameLen {
			return nil, fmt.Errorf("%w: chunks[%d].name: %d bytes, at most %d", transfer.ErrInvalidArgument, i, len(c.GetName()), MaxNameLen)
		}
		if j, dup := first[id]; dup {
			return nil, fmt.Errorf("%w: chunks[%d].id is the same as chunks[%d].id: a batch names each chunk once", transfer.ErrInvalidArgument, i, j)
		}
		first[id] = i
		ids[i] = id
	}
	return ids, nil
}
