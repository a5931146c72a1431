package store

import (
	"hash/crc32"
	"math/rand/v2"
	"os"
	"testing"
)

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
