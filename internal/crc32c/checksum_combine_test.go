package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
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
			got := CombineChecksum(crc32.Checksum(a, ref), crc32.Checksum(b, ref), int64(len(b)))
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
