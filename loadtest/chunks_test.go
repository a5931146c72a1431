package loadtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/loadtest/trace"
)

func TestBlockChunkIDsFollowTheDocumentedChain(t *testing.T) {
	var seedIn []byte
	seedIn = append(seedIn, "kvring/loadtest/block/v1\x00"...)
	seedIn = binary.LittleEndian.AppendUint64(seedIn, 42)
	parent := client.ChunkID(sha256.Sum256(seedIn))
	if BlockSeed(42) != parent {
		t.Fatalf("BlockSeed(42) = %s, want %s", BlockSeed(42), parent)
	}
	ids := BlockChunkIDs(42, 32)
	for i, id := range ids {
		parent = client.NextChunkID(parent, []uint32{uint32(i)})
		if id != parent {
			t.Fatalf("chunk %d = %s, want %s", i, id, parent)
		}
	}
}

func TestBlockChunkIDsArePrefixStableAndDistinct(t *testing.T) {
	long, short := BlockChunkIDs(7, 32), BlockChunkIDs(7, 5)
	for i := range short {
		if short[i] != long[i] {
			t.Fatalf("chunk %d differs between a 5- and a 32-chunk block", i)
		}
	}
	seen := make(map[ChunkID]bool)
	for _, b := range []int64{0, 1, 7, -1} {
		for _, id := range BlockChunkIDs(b, 32) {
			if seen[id] {
				t.Fatalf("duplicate id %s", id)
			}
			seen[id] = true
		}
	}
}

func TestChunkBytesAreDerivedFromTheIDAlone(t *testing.T) {
	a, b := BlockChunkIDs(1, 2)[0], BlockChunkIDs(1, 2)[1]
	x := ChunkBytes(a, 1024)
	if string(x) != string(ChunkBytes(a, 1024)) {
		t.Fatal("ChunkBytes is not deterministic")
	}
	if string(ChunkBytes(a, 100)) != string(x[:100]) {
		t.Fatal("a shorter chunk is not a prefix of a longer one")
	}
	if string(ChunkBytes(b, 1024)) == string(x) {
		t.Fatal("two ids give the same bytes")
	}
	if !VerifyChunk(a, x) {
		t.Fatal("VerifyChunk rejects the right bytes")
	}
	x[500] ^= 1
	if VerifyChunk(a, x) {
		t.Fatal("VerifyChunk accepts a flipped bit")
	}
	// Every length is a prefix of the longest, and any flipped byte, in the
	// middle of a word or past VerifyChunk's first few KiB, is caught.
	long := ChunkBytes(a, 3*4096+77)
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 63, 4095, 4096, 4097, 8200, len(long)} {
		p := ChunkBytes(a, n)
		if !bytes.Equal(p, long[:n]) || !VerifyChunk(a, p) {
			t.Fatalf("%d bytes: not a prefix of %d, or not verified", n, len(long))
		}
		for _, at := range []int{0, n / 2, n - 1} {
			if n == 0 {
				break
			}
			p[at] ^= 0x80
			if VerifyChunk(a, p) {
				t.Fatalf("%d bytes: VerifyChunk accepts a flipped byte at %d", n, at)
			}
			p[at] ^= 0x80
		}
	}
}

func TestPlanRequestSplitsBlocksIntoChunks(t *testing.T) {
	// Two full blocks and a last block of 40 tokens.
	req := trace.Request{InputLength: 2*512 + 40, HashIDs: []int64{10, 11, 12}}
	plan := PlanRequest(req, 16)
	if want := 32 + 32 + 3; len(plan) != want {
		t.Fatalf("%d chunks, want %d", len(plan), want)
	}
	tokens := 0
	for i, c := range plan {
		tokens += c.Tokens
		block, index := req.HashIDs[i/32], i%32
		if c.Block != block || c.Index != index || c.ID != BlockChunkIDs(block, index+1)[index] {
			t.Fatalf("chunk %d = block %d index %d, want block %d index %d", i, c.Block, c.Index, block, index)
		}
	}
	if tokens != req.InputLength {
		t.Fatalf("chunks carry %d tokens, want %d", tokens, req.InputLength)
	}
	if last := plan[len(plan)-1]; last.Tokens != 8 {
		t.Fatalf("last chunk has %d tokens, want 8", last.Tokens)
	}
	if got := PlanRequest(req, 512); len(got) != 3 || got[2].Tokens != 40 {
		t.Fatalf("block-level plan = %+v", got)
	}
}

// TestVerifyChunkChecksEveryByteOfEveryLength: the streaming comparison
// agrees with ChunkBytes at every length around the 8-byte steps, and a flip
// of any one byte is caught, including in the tail.
func TestVerifyChunkChecksEveryByteOfEveryLength(t *testing.T) {
	id := BlockSeed(7)
	for n := 0; n <= 40; n++ {
		p := ChunkBytes(id, n)
		if !VerifyChunk(id, p) {
			t.Fatalf("length %d: VerifyChunk rejects ChunkBytes", n)
		}
		for i := range p {
			p[i] ^= 0x80
			if VerifyChunk(id, p) {
				t.Fatalf("length %d: a flipped byte %d is accepted", n, i)
			}
			p[i] ^= 0x80
		}
	}
}

func BenchmarkChunkBytes(b *testing.B) {
	p := make([]byte, 2<<20)
	id := BlockSeed(1)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		fillChunk(id, p)
	}
}
