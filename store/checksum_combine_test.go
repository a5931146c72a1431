package store

import (
	"hash/crc32"
	"math/rand/v2"
	"os"
	"testing"
)

// TestCombineChecksumMatchesTheWholeMessage: for random messages split at a
// random point (either side possibly empty), combining the CRC-32Cs of the
// two sides gives hash/crc32's CRC-32C of the whole.
func TestCombineChecksumMatchesTheWholeMessage(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(14, 2))
	ref := crc32.MakeTable(crc32.Castagnoli) // independent of the package's table
	buf := make([]byte, 3<<20)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 2, 3, 7, 8, 63, 64, 65, 255, 4096, 1 << 20, 3 << 20}
	for range 200 {
		lengths = append(lengths, rng.IntN(1<<12), rng.IntN(len(buf)+1))
	}
	for _, n := range lengths {
		p := buf[:n]
		want := crc32.Checksum(p, ref)
		for _, k := range []int{0, n, rng.IntN(n + 1), rng.IntN(n + 1)} {
			a, b := p[:k], p[k:]
			got := combineChecksum(crc32.Checksum(a, ref), crc32.Checksum(b, ref), int64(len(b)))
			if got != want {
				t.Fatalf("combine of %d+%d bytes: %08x, want %08x", len(a), len(b), got, want)
			}
		}
	}
}

// TestXPow8nModPIsRepeatedShiftByOneByte: x^(8n) mod P from square and
// multiply equals n multiplications by x^8, for small n; and multiplying by
// x^0 changes nothing.
func TestXPow8nModPIsRepeatedShiftByOneByte(t *testing.T) {
	t.Parallel()
	one := uint32(1) << 31
	p := one
	for n := int64(0); n < 300; n++ {
		if got := xPow8nModP(n); got != p {
			t.Fatalf("x^(8*%d) mod P: %08x, want %08x", n, got, p)
		}
		p = mulModP(p, 1<<23)
	}
	rng := rand.New(rand.NewPCG(1, 14))
	for range 100 {
		a := rng.Uint32()
		if mulModP(a, one) != a || mulModP(one, a) != a {
			t.Fatalf("%08x * 1 mod P changed it", a)
		}
	}
}

// TestGuardedChecksumPartsMatchesOnePass: splitting a checksum across
// goroutines gives the one-pass CRC-32C for every length and part count,
// including lengths that do not divide evenly and more parts than the bytes
// allow.
func TestGuardedChecksumPartsMatchesOnePass(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 14))
	buf := make([]byte, 5<<20)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, parallelChecksumPart - 1, parallelChecksumPart, 2 * parallelChecksumPart,
		2*parallelChecksumPart + 1, 2 << 20, 5 << 20}
	for range 40 {
		lengths = append(lengths, rng.IntN(len(buf)+1))
	}
	for _, n := range lengths {
		want := crc32.Checksum(buf[:n], crc32.MakeTable(crc32.Castagnoli))
		for _, parts := range []int{0, 1, 2, 3, 4, 7, 64} {
			got, err := guardedChecksumParts(buf[:n], parts)
			if err != nil || got != want {
				t.Fatalf("%d bytes in %d parts: %08x, %v; want %08x", n, parts, got, err, want)
			}
		}
	}
}

// TestGuardedChecksumPartsTurnsAFaultIntoAnError: a blob whose segment is
// truncated fails a checksum split across goroutines with ErrFault, on
// whichever goroutine the fault happens, instead of crashing the process.
func TestGuardedChecksumPartsTurnsAFaultIntoAnError(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 16<<20)
	cfg.SegmentSize = 8 << 20
	cfg.ChecksumParts = 4
	s := openTest(t, cfg)
	b := filledBlob(t, s, testID(1), 2<<20)
	defer b.Free()
	path := s.arena.segmentPath(b.Location().Segment)
	// The first half stays: only the goroutines of the last parts fault.
	if err := os.Truncate(path, b.Location().Offset+1<<20); err != nil {
		t.Fatal(err)
	}
	_, err := guardedChecksumParts(b.Bytes(), 4)
	wantErr(t, err, ErrFault)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	_, err = b.Checksum()
	wantErr(t, err, ErrFault)
}
