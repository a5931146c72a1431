package client

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// ChunkIDSize is the length of a chunk id in bytes.
const ChunkIDSize = sha256.Size

// ChunkID names a prefix chunk: the SHA-256 of its parent's id followed by the
// chunk's token ids, each encoded as a little-endian uint32. Because every id
// covers its parent, one id stands for the whole prompt prefix up to and
// including its chunk. See docs/chunk-id.md for the byte layout and test vectors.
//
// The first chunk of a prompt has the zero ChunkID (32 zero bytes) as its
// parent. Namespaces do not enter the id; the server keeps them apart.
//
// A ChunkID is a value: comparable, usable as a map key, safe to copy and to
// share between goroutines.
type ChunkID [ChunkIDSize]byte

// ErrInvalidChunkID is returned, wrapped, by ParseChunkID for malformed text.
var ErrInvalidChunkID = errors.New("client: invalid chunk id")

// String returns the id as 64 lowercase hexadecimal characters.
func (id ChunkID) String() string {
	return hex.EncodeToString(id[:])
}

// ParseChunkID parses the 64-character hexadecimal form produced by
// ChunkID.String. Upper- and lowercase digits are accepted; anything else,
// including surrounding space or a "0x" prefix, is an error wrapping
// ErrInvalidChunkID.
func ParseChunkID(s string) (ChunkID, error) {
	var id ChunkID
	if len(s) != 2*ChunkIDSize {
		return id, fmt.Errorf("%w %.80q: want %d hex characters, got %d", ErrInvalidChunkID, s, 2*ChunkIDSize, len(s))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return ChunkID{}, fmt.Errorf("%w %q: %w", ErrInvalidChunkID, s, err)
	}
	return id, nil
}

// chunkIDBufTokens is how many tokens NextChunkID encodes into its stack
// buffer at a time. Chunks up to this size (the common 16-, 32- and 64-token
// settings) are hashed in one sha256.Sum256 call; longer ones are streamed
// through a hash state that stays on the stack.
const chunkIDBufTokens = 128

// NextChunkID returns the id of the chunk holding tokens whose parent is
// parent: SHA-256(parent ‖ LE-uint32(tokens[0]) ‖ LE-uint32(tokens[1]) ‖ ...).
// Use the zero ChunkID as the parent of a prompt's first chunk.
//
// It does not allocate, is safe for concurrent use and does not block.
func NextChunkID(parent ChunkID, tokens []uint32) ChunkID {
	var buf [ChunkIDSize + 4*chunkIDBufTokens]byte
	if len(tokens) <= chunkIDBufTokens {
		copy(buf[:], parent[:])
		n := ChunkIDSize
		for _, t := range tokens {
			binary.LittleEndian.PutUint32(buf[n:], t)
			n += 4
		}
		return sha256.Sum256(buf[:n])
	}
	h := sha256.New()
	h.Write(parent[:])
	for len(tokens) > 0 {
		k := min(len(tokens), chunkIDBufTokens)
		for i, t := range tokens[:k] {
			binary.LittleEndian.PutUint32(buf[4*i:], t)
		}
		h.Write(buf[:4*k])
		tokens = tokens[k:]
	}
	var id ChunkID
	h.Sum(id[:0])
	return id
}

// ChunkIDs splits a prompt into chunks of tokensPerChunk tokens and returns
// the id of each FULL chunk, in prompt order, chained from the zero root:
// ids[0] = NextChunkID(ChunkID{}, tokens[:n]), ids[i] = NextChunkID(ids[i-1], ...).
//
// A trailing partial chunk (the last len(tokens) % tokensPerChunk tokens) has no
// id: it is never cached, so the result has len(tokens) / tokensPerChunk
// entries, possibly none. tokensPerChunk must be positive and must match the
// namespace's setting, or every lookup will miss.
//
// It allocates only the returned slice, is safe for concurrent use and does
// not block.
func ChunkIDs(tokens []uint32, tokensPerChunk int) ([]ChunkID, error) {
	if tokensPerChunk <= 0 {
		return nil, fmt.Errorf("client: cannot compute chunk ids: tokens per chunk must be positive, got %d", tokensPerChunk)
	}
	ids := make([]ChunkID, len(tokens)/tokensPerChunk)
	var parent ChunkID
	for i := range ids {
		parent = NextChunkID(parent, tokens[i*tokensPerChunk:(i+1)*tokensPerChunk])
		ids[i] = parent
	}
	return ids, nil
}
