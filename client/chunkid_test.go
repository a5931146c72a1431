package client

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chunkIDVectors mirrors testdata/chunkid_vectors.json, which is generated
// independently by the Python reference in docs/chunk-id.md.
type chunkIDVectors struct {
	NextChunkID []struct {
		Name   string   `json:"name"`
		Parent string   `json:"parent"`
		Tokens []uint32 `json:"tokens"`
		ID     string   `json:"id"`
	} `json:"next_chunk_id"`
	ChunkIDs []struct {
		Name           string   `json:"name"`
		Tokens         []uint32 `json:"tokens"`
		TokensPerChunk int      `json:"tokens_per_chunk"`
		NumChunks      int      `json:"num_chunks"`
		IDs            []struct {
			Index int    `json:"index"`
			ID    string `json:"id"`
		} `json:"ids"`
	} `json:"chunk_ids"`
}

func loadChunkIDVectors(t *testing.T) chunkIDVectors {
	t.Helper()
	path := filepath.Join("testdata", "chunkid_vectors.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cannot read vectors: %v", err)
	}
	var v chunkIDVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("cannot decode %s: %v", path, err)
	}
	if len(v.NextChunkID) == 0 || len(v.ChunkIDs) == 0 {
		t.Fatalf("%s holds no vectors", path)
	}
	return v
}

func mustParseChunkID(t *testing.T, s string) ChunkID {
	t.Helper()
	id, err := ParseChunkID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestNextChunkIDMatchesPythonVectors(t *testing.T) {
	t.Parallel()
	for _, c := range loadChunkIDVectors(t).NextChunkID {
		got := NextChunkID(mustParseChunkID(t, c.Parent), c.Tokens)
		if got.String() != c.ID {
			t.Errorf("%s: NextChunkID = %s, want %s", c.Name, got, c.ID)
		}
	}
}

func TestChunkIDsMatchPythonVectors(t *testing.T) {
	t.Parallel()
	for _, c := range loadChunkIDVectors(t).ChunkIDs {
		ids, err := ChunkIDs(c.Tokens, c.TokensPerChunk)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if len(ids) != c.NumChunks {
			t.Errorf("%s: got %d ids, want %d", c.Name, len(ids), c.NumChunks)
			continue
		}
		for _, want := range c.IDs {
			if got := ids[want.Index].String(); got != want.ID {
				t.Errorf("%s: id[%d] = %s, want %s", c.Name, want.Index, got, want.ID)
			}
		}
		// ChunkIDs is NextChunkID chained from the zero root.
		var parent ChunkID
		for i := range ids {
			parent = NextChunkID(parent, c.Tokens[i*c.TokensPerChunk:(i+1)*c.TokensPerChunk])
			if ids[i] != parent {
				t.Errorf("%s: id[%d] = %s, chained NextChunkID gives %s", c.Name, i, ids[i], parent)
			}
		}
	}
}

// naiveChunkID is the definition written out with no care for allocations.
func naiveChunkID(parent ChunkID, tokens []uint32) ChunkID {
	b := append([]byte(nil), parent[:]...)
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, t)
	}
	return sha256.Sum256(b)
}

func TestNextChunkIDMatchesNaiveReference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	// Every length around the stack buffer's size, plus several buffers' worth.
	for n := 0; n <= 3*chunkIDBufTokens+1; n++ {
		var parent ChunkID
		for i := range parent {
			parent[i] = byte(r.Uint32())
		}
		tokens := make([]uint32, n)
		for i := range tokens {
			tokens[i] = r.Uint32()
		}
		if got, want := NextChunkID(parent, tokens), naiveChunkID(parent, tokens); got != want {
			t.Fatalf("%d tokens: NextChunkID = %s, naive = %s", n, got, want)
		}
	}
}

func TestChunkIDChangesWithAnyTokenOrParent(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 16, chunkIDBufTokens + 3} {
		tokens := make([]uint32, n)
		for i := range tokens {
			tokens[i] = uint32(i) * 2654435761
		}
		parent := NextChunkID(ChunkID{}, []uint32{42})
		base := NextChunkID(parent, tokens)
		for i := range tokens {
			for _, flip := range []uint32{1, 1 << 8, 1 << 16, 1 << 31} {
				changed := append([]uint32(nil), tokens...)
				changed[i] ^= flip
				if NextChunkID(parent, changed) == base {
					t.Fatalf("%d tokens: flipping %#x in token %d left the id unchanged", n, flip, i)
				}
			}
		}
		for i := range parent {
			changed := parent
			changed[i] ^= 0x80
			if NextChunkID(changed, tokens) == base {
				t.Fatalf("%d tokens: flipping parent byte %d left the id unchanged", n, i)
			}
		}
		if NextChunkID(parent, tokens[:n-1]) == base {
			t.Fatalf("%d tokens: dropping the last token left the id unchanged", n)
		}
	}
}

func TestChunkIDsChainCoversTheWholePrefix(t *testing.T) {
	t.Parallel()
	a := make([]uint32, 64)
	for i := range a {
		a[i] = uint32(i)
	}
	b := append([]uint32(nil), a...)
	b[0]++ // differ only in the first chunk
	idsA, err := ChunkIDs(a, 16)
	if err != nil {
		t.Fatal(err)
	}
	idsB, err := ChunkIDs(b, 16)
	if err != nil {
		t.Fatal(err)
	}
	for i := range idsA {
		if idsA[i] == idsB[i] {
			t.Errorf("chunk %d: same id although the prompts differ in chunk 0", i)
		}
	}
}

func TestChunkIDsRejectsNonPositiveTokensPerChunk(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1, -16} {
		ids, err := ChunkIDs([]uint32{1, 2, 3}, n)
		if err == nil || ids != nil {
			t.Errorf("ChunkIDs(tokensPerChunk=%d) = %v, %v; want nil and an error", n, ids, err)
		} else if !strings.Contains(err.Error(), "tokens per chunk") {
			t.Errorf("ChunkIDs(tokensPerChunk=%d): error %q does not name the setting", n, err)
		}
	}
}

func TestChunkIDStringParseRoundTrip(t *testing.T) {
	t.Parallel()
	id := NextChunkID(ChunkID{}, []uint32{1, 2, 3})
	s := id.String()
	if len(s) != 64 || strings.ToLower(s) != s {
		t.Fatalf("String() = %q, want 64 lowercase hex characters", s)
	}
	for _, in := range []string{s, strings.ToUpper(s)} {
		got, err := ParseChunkID(in)
		if err != nil || got != id {
			t.Errorf("ParseChunkID(%q) = %s, %v; want %s", in, got, err, id)
		}
	}
	if got := (ChunkID{}).String(); got != strings.Repeat("0", 64) {
		t.Errorf("zero ChunkID String() = %q", got)
	}
}

func TestParseChunkIDRejectsMalformedText(t *testing.T) {
	t.Parallel()
	valid := strings.Repeat("ab", 32)
	for _, in := range []string{
		"",
		valid[:63],
		valid + "a",
		valid + "ab",
		"0x" + valid[2:],
		" " + valid[1:],
		"g" + valid[1:],
		valid[:62] + "z9",
		strings.Repeat("€", 21) + "a", // 64 bytes, not hex
	} {
		id, err := ParseChunkID(in)
		if !errors.Is(err, ErrInvalidChunkID) {
			t.Errorf("ParseChunkID(%q) error = %v, want ErrInvalidChunkID", in, err)
		}
		if id != (ChunkID{}) {
			t.Errorf("ParseChunkID(%q) returned non-zero id %s with its error", in, id)
		}
	}
	_, err := ParseChunkID("abc")
	if err == nil || !strings.Contains(err.Error(), "want 64 hex characters, got 3") {
		t.Errorf("short input: error %v does not say what was wrong", err)
	}
}

func TestNextChunkIDDoesNotAllocate(t *testing.T) {
	short := make([]uint32, 16)
	long := make([]uint32, 3*chunkIDBufTokens+5)
	for name, tokens := range map[string][]uint32{"16 tokens": short, "long chunk": long} {
		if n := testing.AllocsPerRun(100, func() { _ = NextChunkID(ChunkID{}, tokens) }); n != 0 {
			t.Errorf("%s: NextChunkID allocates %v times per call, want 0", name, n)
		}
	}
}

// BenchmarkChunkIDs4096Tokens16PerChunk is the hot case of the design: a
// 4k-token prompt at 16 tokens per chunk, 256 ids.
func BenchmarkChunkIDs4096Tokens16PerChunk(b *testing.B) {
	tokens := make([]uint32, 4096)
	for i := range tokens {
		tokens[i] = uint32(i) * 2654435761
	}
	b.SetBytes(int64(4 * len(tokens)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ChunkIDs(tokens, 16); err != nil {
			b.Fatal(err)
		}
	}
}
