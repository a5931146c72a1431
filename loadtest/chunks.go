package loadtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"

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

// ChunkBytes returns n bytes derived from id alone: the xorshift64 stream
// seeded from id (splitmix64 over its four words), eight little-endian bytes
// per step. A shorter chunk is a prefix of a longer one with the same id. The
// generator is cheap (about 3.5 GB/s on one core) so that a benchmark
// measures the backend rather than its own byte generation; it is not meant
// to be unpredictable. It is safe for concurrent use and does not block.
func ChunkBytes(id ChunkID, n int) []byte {
	p := make([]byte, n)
	fillChunk(id, p)
	return p
}

// chunkSeed mixes the id's four words into a non-zero xorshift state.
func chunkSeed(id ChunkID) uint64 {
	var x uint64
	for i := 0; i < len(id); i += 8 {
		x = splitmix64(x ^ binary.LittleEndian.Uint64(id[i:]))
	}
	return x | 1
}

func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

func xorshift64(x uint64) uint64 {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x
}

// fillChunk writes ChunkBytes(id, len(p)) into p.
func fillChunk(id ChunkID, p []byte) {
	x := chunkSeed(id)
	i := 0
	for ; i+8 <= len(p); i += 8 {
		x = xorshift64(x)
		binary.LittleEndian.PutUint64(p[i:], x)
	}
	if i < len(p) {
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], xorshift64(x))
		copy(p[i:], tail[:])
	}
}

// VerifyChunk reports whether data is what ChunkBytes(id, len(data)) returns.
// It compares as it generates, without allocating.
func VerifyChunk(id ChunkID, data []byte) bool {
	x := chunkSeed(id)
	i := 0
	for ; i+8 <= len(data); i += 8 {
		x = xorshift64(x)
		if binary.LittleEndian.Uint64(data[i:]) != x {
			return false
		}
	}
	if i < len(data) {
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], xorshift64(x))
		return bytes.Equal(data[i:], tail[:len(data)-i])
	}
	return true
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
