package crc32c

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// crc32cXNModP returns x^n mod P for the CRC-32C polynomial P, bit-reflected
// (bit 31 holds x^0), by n multiplications by x.
func crc32cXNModP(n int) uint32 {
	v := uint32(1) << 31
	for ; n > 0; n-- {
		if v&1 != 0 {
			v = v>>1 ^ crc32.Castagnoli
		} else {
			v >>= 1
		}
	}
	return v
}

// TestCopyCRCFoldConstants derives the constants written out in
// copycrc_amd64.s: x^(D+31) and x^(D-33) mod P for a fold over D bits.
func TestCopyCRCFoldConstants(t *testing.T) {
	t.Parallel()
	want := map[int][2]uint32{ // as in copycrc_amd64.s
		128:  {0xf20c0dfe, 0x493c7d27},
		256:  {0x3da6d0cb, 0xba4fc28e},
		512:  {0x740eef02, 0x9e4addf8},
		768:  {0xc49f4f67, 0x0715ce53},
		1024: {0x6992cea2, 0x0d3b6092},
	}
	for d, k := range want {
		if got := [2]uint32{crc32cXNModP(d + 31), crc32cXNModP(d - 33)}; got != k {
			t.Errorf("D=%d: constants %#08x, want %#08x", d, got, k)
		}
	}
}

// copyCRCSizes is every size up to 300, sizes either side of every
// threshold and block boundary of copyCRC32C and hash/crc32 (fold minimum,
// 32-byte alignment, 128-byte loop, hash/crc32's 3*168 and 3*1344 blocks,
// the non-temporal threshold), and random sizes up to 3 MiB.
func copyCRCSizes(rng *rand.Rand) []int {
	var sizes []int
	for n := 0; n <= 300; n++ {
		sizes = append(sizes, n)
	}
	for _, b := range []int{
		167, 168, 169, 504, 3*1344 - 1, 3 * 1344, 3*1344 + 1, 4096,
		copyCRCFoldMin, copyCRCFoldMin + 31, copyCRCFoldMin + 128,
		copyCRCFoldMin + 159, copyCRCFoldMin + 160, 1 << 16,
		CopyNonTemporalMin, CopyNonTemporalMin + 127,
		256 << 10, 2 << 20, 3 << 20,
	} {
		for d := -2; d <= 2; d++ {
			sizes = append(sizes, b+d)
		}
	}
	for i := 0; i < 150; i++ {
		sizes = append(sizes, rng.IntN(3<<20+1))
	}
	for i := 0; i < 300; i++ {
		sizes = append(sizes, rng.IntN(20<<10))
	}
	return sizes
}

// TestCopyCRC32CMatchesTwoPass checks copyCRC32C against copy plus
// crc32.Update over many sizes, misaligned src and dst, random initial CRCs:
// same CRC, dst[:n] equals src, nothing past dst[n] written.
func TestCopyCRC32CMatchesTwoPass(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	const slack = 64
	buf := make([]byte, 3<<20+2*slack)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	out := make([]byte, 3<<20+2*slack)
	for _, n := range copyCRCSizes(rng) {
		if n < 0 {
			continue
		}
		so, do := rng.IntN(slack), rng.IntN(slack)
		src := buf[so : so+n]
		fill := byte(rng.Uint32())
		for i := range out[:do+n+slack] {
			out[i] = fill
		}
		dst := out[do : do+n+slack]
		crc := rng.Uint32()
		if n%7 == 0 {
			crc = 0
		}
		want := crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), src)
		if got := copyCRC32C(dst, src, crc); got != want {
			t.Fatalf("n=%d src+%d dst+%d crc=%#x: got %#08x, want %#08x", n, so, do, crc, got, want)
		}
		if !bytes.Equal(dst[:n], src) {
			t.Fatalf("n=%d src+%d dst+%d: dst differs from src", n, so, do)
		}
		for i, b := range out[:do] {
			if b != fill {
				t.Fatalf("n=%d dst+%d: byte %d before dst written", n, do, i)
			}
		}
		for i, b := range dst[n:] {
			if b != fill {
				t.Fatalf("n=%d dst+%d: byte %d past len(src) written", n, do, i)
			}
		}
	}
}

// TestCopyCRCFoldBothStores runs the kernel itself with ordinary and
// non-temporal stores at sizes that copyCRC32C would send down only one of
// the two paths.
func TestCopyCRCFoldBothStores(t *testing.T) {
	t.Parallel()
	if !copyCRCHasFold {
		t.Skip("no fused kernel on this CPU")
	}
	rng := rand.New(rand.NewPCG(5, 9))
	tab := crc32.MakeTable(crc32.Castagnoli)
	src := make([]byte, 2<<20)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	dst := make([]byte, len(src)+32)
	off := int(-uintptr(unsafe.Pointer(&dst[0])) & 31) // 32-byte aligned, as nt needs
	for _, n := range []int{128, 256, 384, 4096, 128 * 1001, 2 << 20} {
		for _, nt := range []bool{false, true} {
			clear(dst)
			crc := rng.Uint32()
			want := ^crc32.Update(^crc, tab, src[:n])
			if got := copyCRCFold(&dst[off], &src[0], n, crc, nt); got != want {
				t.Errorf("n=%d nt=%v: got %#08x, want %#08x", n, nt, got, want)
			}
			if !bytes.Equal(dst[off:off+n], src[:n]) {
				t.Errorf("n=%d nt=%v: dst differs from src", n, nt)
			}
		}
	}
}

// TestCopyCRC32CChained checks that feeding a stream in pieces of any size
// gives the CRC of the whole, as a staged write does.
func TestCopyCRC32CChained(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 5))
	src := make([]byte, 1<<20+12345)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	dst := make([]byte, len(src))
	var crc uint32
	for off := 0; off < len(src); {
		n := min(rng.IntN(64<<10), len(src)-off)
		crc = copyCRC32C(dst[off:], src[off:off+n], crc)
		off += n
	}
	if want := crc32.Checksum(src, crc32.MakeTable(crc32.Castagnoli)); crc != want {
		t.Fatalf("chained CRC %#08x, want %#08x", crc, want)
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("dst differs from src")
	}
}

// TestCopyCRC32CGenericMatches checks the fallback used off amd64 and on
// CPUs without the fused kernel.
func TestCopyCRC32CGenericMatches(t *testing.T) {
	t.Parallel()
	src := []byte("123456789")
	dst := make([]byte, len(src))
	if got := copyCRC32CGeneric(dst, src, 0); got != 0xe3069283 {
		t.Fatalf("CRC-32C check value %#08x, want 0xe3069283", got)
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("dst differs from src")
	}
}

func TestCopyCRC32CShortDstPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for dst shorter than src")
		}
	}()
	copyCRC32C(make([]byte, 4095, 8192), make([]byte, 4096), 0)
}
