package sockwire

import (
	"encoding/binary"
	"testing"
)

// TestAShortBodySetsErrOnceAndReadsZeros: the first read past the end sets
// Err; it and every later read return zeros, so a decoder checks once.
func TestAShortBodySetsErrOnceAndReadsZeros(t *testing.T) {
	b := binary.LittleEndian.AppendUint32(nil, 7)
	b = AppendStr(b, "hi")
	r := &Reader{B: b}
	if r.U32() != 7 || string(r.Str()) != "hi" || r.Err != nil || len(r.B) != 0 {
		t.Fatalf("decoding what was encoded: err %v, %d bytes left", r.Err, len(r.B))
	}
	if r.U64() != 0 || r.Err == nil {
		t.Fatal("a read past the end set no error")
	}
	first := r.Err
	if r.U8() != 0 || r.Err != first {
		t.Fatal("a later read changed the first error")
	}
}

// TestACountTheBodyCannotHoldIsRefused: a count of items larger than the
// rest of the body is an error, so a forged count allocates nothing.
func TestACountTheBodyCannotHoldIsRefused(t *testing.T) {
	r := &Reader{B: binary.LittleEndian.AppendUint32(nil, 1<<30)}
	if n := r.Count(8); n != 0 || r.Err == nil {
		t.Fatalf("count %d err %v: want 0 and an error", n, r.Err)
	}
}
