package loadtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/loadtest/trace"
)

// blockSeedDomain separates block seeds from every other SHA-256 input.
const blockSeedDomain = "kvring/loadtest/block/v1\x00"

// BlockSeed returns the id a Mooncake block's chunk chain starts from:
// SHA-256("kvring/loadtest/block/v1\x00" ‖ LE-uint64(block)). A trace block id
// already covers the block and every block before it (a chained prefix hash),
// so the seed needs nothing else to name the whole prefix.
func BlockSeed(block int64) ChunkID {
	var buf [len(blockSeedDomain) + 8]byte
	copy(buf[:], blockSeedDomain)
	binary.LittleEndian.PutUint64(buf[len(blockSeedDomain):], uint64(block))
	return sha256.Sum256(buf[:])
}

// BlockChunkIDs returns the ids of the first n chunks of a block, chained like
// client.NextChunkID with the chunk's index standing for its tokens:
//
//	ids[0] = client.NextChunkID(BlockSeed(block), []uint32{0})
//	ids[i] = client.NextChunkID(ids[i-1], []uint32{uint32(i)})
//
// so the first k ids of a block do not depend on how many chunks the block
// has. It is safe for concurrent use and does not block.
func BlockChunkIDs(block int64, n int) []ChunkID {
	ids := make([]ChunkID, n)
	parent := BlockSeed(block)
	for i := range ids {
		parent = client.NextChunkID(parent, []uint32{uint32(i)})
		ids[i] = parent
	}
	return ids
}

// ChunkBytes returns n bytes derived from id alone: the first n bytes of the
// ChaCha8 stream seeded with id. A shorter chunk is a prefix of a longer one
// with the same id. It is safe for concurrent use and does not block.
func ChunkBytes(id ChunkID, n int) []byte {
	p := make([]byte, n)
	fillChunk(id, p)
	return p
}

// fillChunk writes ChunkBytes(id, len(p)) into p.
func fillChunk(id ChunkID, p []byte) {
	r := rand.NewChaCha8(id)
	_, _ = r.Read(p) // ChaCha8.Read never fails
}

// VerifyChunk reports whether data is what ChunkBytes(id, len(data)) returns.
func VerifyChunk(id ChunkID, data []byte) bool {
	return bytes.Equal(data, ChunkBytes(id, len(data)))
}

// PlannedChunk is one chunk of a request: where it comes from in the trace and
// how many tokens (hence bytes) it carries.
type PlannedChunk struct {
	ID     ChunkID
	Block  int64 // trace block id
	Index  int   // chunk index inside the block
	Tokens int
}

// key names the chunk compactly (cheaper than its id in a map).
func (c PlannedChunk) key() chunkKey { return chunkKey{c.Block, int32(c.Index)} }

type chunkKey struct {
	block int64
	index int32
}

// PlanRequest splits the blocks of r into chunks of chunkTokens tokens, in
// prompt order. Block i carries r.BlockTokenCount(i) tokens, so it has
// ceil(tokens/chunkTokens) chunks and only the last chunk of a request may be
// short. chunkTokens must be positive; it is clamped to trace.BlockTokens.
func PlanRequest(r trace.Request, chunkTokens int) []PlannedChunk {
	chunkTokens = min(max(chunkTokens, 1), trace.BlockTokens)
	var out []PlannedChunk
	for i, block := range r.HashIDs {
		tokens := r.BlockTokenCount(i)
		if tokens <= 0 {
			continue
		}
		n := (tokens + chunkTokens - 1) / chunkTokens
		for j, id := range BlockChunkIDs(block, n) {
			out = append(out, PlannedChunk{ID: id, Block: block, Index: j,
				Tokens: min(chunkTokens, tokens-j*chunkTokens)})
		}
	}
	return out
}
