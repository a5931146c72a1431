package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestUpdateChecksumContinuesChecksumPieceByPiece: UpdateChecksum from 0 is
// Checksum, and any split of the bytes gives the CRC-32C of the whole.
func TestUpdateChecksumContinuesChecksumPieceByPiece(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	ref := crc32.MakeTable(crc32.Castagnoli) // independent of the package's table
	for _, n := range []int{0, 1, 7, 64, 1000, 70000} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		want := crc32.Checksum(p, ref)
		if got := Checksum(p); got != want {
			t.Fatalf("Checksum of %d bytes: %08x, want %08x", n, got, want)
		}
		if got := UpdateChecksum(0, p); got != want {
			t.Fatalf("UpdateChecksum(0, %d bytes): %08x, want %08x", n, got, want)
		}
		for range 5 {
			var crc uint32
			for rest := p; len(rest) > 0; {
				k := 1 + rng.IntN(len(rest))
				crc = UpdateChecksum(crc, rest[:k])
				rest = rest[k:]
			}
			if crc != want {
				t.Fatalf("UpdateChecksum piece by piece over %d bytes: %08x, want %08x", n, crc, want)
			}
		}
	}
}
