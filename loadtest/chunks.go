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

// ChunkBytesVersion numbers the definition of ChunkBytes. It changes when the
// bytes do, so that chunks written by an older load generator are not read
// as corrupt by a newer one (kvring bench puts it in its namespace).
const ChunkBytesVersion = 2

// ChunkBytes returns n bytes derived from id alone: eight little-endian
// bytes per word, each word a mix of a seed (splitmix64 over the id's four
// words) and the word's index (see chunkGen). A shorter chunk is a prefix of
// a longer one with the same id. The generator is cheap (BenchmarkChunkBytes)
// so that a benchmark measures the backend rather than its own byte
// generation; it is not meant to be unpredictable. It is safe for
// concurrent use and does not block.
func ChunkBytes(id ChunkID, n int) []byte {
	p := make([]byte, n)
	fillChunk(id, p)
	return p
}

// chunkSeed mixes the id's four words into the seed of its chunk's words.
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

// chunkGen generates a chunk's bytes: word i (8 bytes, little-endian) is
// mix(seed + i*golden), a function of the id and the word's position alone,
// so the words can be computed side by side (one multiply each) and a word
// out of place never matches.
type chunkGen struct {
	seed uint64
	next uint64 // index of the next word
}

func newChunkGen(id ChunkID) chunkGen { return chunkGen{seed: chunkSeed(id)} }

const golden = 0x9E3779B97F4A7C15

func chunkWord(seed, i uint64) uint64 {
	x := (seed + i*golden) * 0xBF58476D1CE4E5B9
	return x ^ x>>31
}

// fill writes the next len(p) bytes. Every call but the last must ask for a
// multiple of 8 bytes.
func (g *chunkGen) fill(p []byte) {
	seed, w := g.seed, g.next
	i := 0
	for ; i+32 <= len(p); i, w = i+32, w+4 {
		binary.LittleEndian.PutUint64(p[i:], chunkWord(seed, w))
		binary.LittleEndian.PutUint64(p[i+8:], chunkWord(seed, w+1))
		binary.LittleEndian.PutUint64(p[i+16:], chunkWord(seed, w+2))
		binary.LittleEndian.PutUint64(p[i+24:], chunkWord(seed, w+3))
	}
	for ; i < len(p); i, w = i+8, w+1 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], chunkWord(seed, w))
		copy(p[i:], b[:])
	}
	g.next = w
}

// fillChunk writes ChunkBytes(id, len(p)) into p.
func fillChunk(id ChunkID, p []byte) {
	g := newChunkGen(id)
	g.fill(p)
}

// VerifyChunk reports whether data is what ChunkBytes(id, len(data)) returns.
// It compares as it generates, a few KiB at a time, without allocating.
func VerifyChunk(id ChunkID, data []byte) bool {
	var buf [4096]byte
	g := newChunkGen(id)
	for len(data) > 0 {
		n := min(len(buf), len(data))
		g.fill(buf[:n])
		if !bytes.Equal(data[:n], buf[:n]) {
			return false
		}
		data = data[n:]
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
	Group  ChunkID // placement group key (Config.ChunksPerGroup); set by the runner
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
