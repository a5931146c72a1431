package client

import (
	"fmt"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// Placement groups: a namespace whose Schema.ChunksPerGroup K is above 1
// places a prompt's chunks on the ring K at a time, so that one Lookup asks a
// handful of nodes instead of one node per chunk. Chunks [0, K) of a prompt
// are placed by the id of chunk 0, [K, 2K) by the id of chunk K, and so on:
// that id is the chunk's group key. See docs/placement.md.

// GroupKeys returns the group key of every chunk of a prompt, for groups of
// k chunks (k <= 1: each chunk is its own key). ids must be the prompt's
// chunk ids from its first chunk on, as ChunkIDs returns them. The result
// is a new slice; ids is not changed.
func GroupKeys(ids []ChunkID, k int) []ChunkID {
	k = max(k, 1)
	keys := make([]ChunkID, len(ids))
	for i := range ids {
		keys[i] = ids[i-i%k]
	}
	return keys
}

// groupSize is this client's K: at least 1.
func (c *Client) groupSize() int { return max(1, int(c.cfg.Schema.ChunksPerGroup)) }

// prefixKeys returns the ring keys of ids that start at a prompt's first
// chunk (Lookup and Get), or nil when every chunk is placed by its own id.
func (c *Client) prefixKeys(ids []ChunkID) [][]byte {
	if c.groupSize() == 1 {
		return nil
	}
	keys := GroupKeys(ids, c.groupSize())
	raw := make([][]byte, len(keys))
	for i := range keys {
		raw[i] = keys[i][:]
	}
	return raw
}

// chunkKeys returns the ring keys of a Put's chunks from their Group
// fields, or nil when every chunk is placed by its own id. A grouped
// namespace needs every chunk's Group.
func (c *Client) chunkKeys(chunks []Chunk) ([][]byte, error) {
	if c.groupSize() == 1 {
		return nil, nil
	}
	raw := make([][]byte, len(chunks))
	for i := range chunks {
		if chunks[i].Group == (ChunkID{}) {
			return nil, fmt.Errorf("%w: chunk %d has no Group: namespace %q places chunks in groups of %d (see GroupKeys)",
				transfer.ErrInvalidArgument, i, c.cfg.Namespace, c.groupSize())
		}
		raw[i] = chunks[i].Group[:]
	}
	return raw, nil
}

// placedKeys returns the ring keys given as group keys, or nil when every
// chunk is placed by its own id.
func (c *Client) placedKeys(ids, groups []ChunkID) ([][]byte, error) {
	if len(groups) != len(ids) {
		return nil, fmt.Errorf("%w: %d group keys for %d ids", transfer.ErrInvalidArgument, len(groups), len(ids))
	}
	if c.groupSize() == 1 {
		return nil, nil
	}
	keys := make([][]byte, len(ids))
	for i := range groups {
		keys[i] = groups[i][:]
	}
	return keys, nil
}

// groupRuns encodes per-chunk ring keys as the wire's runs; nil keys give
// no runs.
func groupRuns(keys [][]byte) []*kvringv1.GroupRun { return transfer.GroupRuns(keys) }

// keyAt returns the ring key of position i: keys[i], or the id itself
// when keys is nil.
func keyAt(keys, ids [][]byte, i int) []byte {
	if keys == nil {
		return ids[i]
	}
	return keys[i]
}

// pickKeys is pick for optional keys.
func pickKeys(keys [][]byte, idx []int) [][]byte {
	if keys == nil {
		return nil
	}
	return pick(keys, idx)
}
