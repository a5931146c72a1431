package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"
)

// TestCRCFold512Constants derives the constants written out in
// crcfold512_amd64.s: x^(D+31) and x^(D-33) mod P for a fold over D bits.
func TestCRCFold512Constants(t *testing.T) {
	t.Parallel()
	want := map[int][2]uint32{ // as in crcfold512_amd64.s
		128:  {0xf20c0dfe, 0x493c7d27},
		256:  {0x3da6d0cb, 0xba4fc28e},
		512:  {0x740eef02, 0x9e4addf8},
		1024: {0x6992cea2, 0x0d3b6092},
		1536: {0xa87ab8a8, 0xab7aff2a},
		2048: {0xdcb17aa4, 0xb9e02b86},
	}
	for d, k := range want {
		if got := [2]uint32{crc32cXNModP(d + 31), crc32cXNModP(d - 33)}; got != k {
			t.Errorf("D=%d: constants %#08x, want %#08x", d, got, k)
		}
	}
}

// TestCRCFold512MatchesHashCRC32 runs the 512-bit kernel itself on every
// multiple of 256 bytes up to 8 KiB and on random ones, from unaligned
// starts and random registers, against hash/crc32. On a CPU without it
// the kernel cannot run: the test says so and checks nothing else.
func TestCRCFold512MatchesHashCRC32(t *testing.T) {
	t.Parallel()
	if !crcHasFold512 {
		t.Log("this CPU has no AVX-512 VPCLMULQDQ: crcFold512 is never called here")
		return
	}
	rng := rand.New(rand.NewPCG(5, 12))
	ref := crc32.MakeTable(crc32.Castagnoli)
	buf := make([]byte, 2<<20+64)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	var lengths []int
	for n := 256; n <= 8<<10; n += 256 {
		lengths = append(lengths, n)
	}
	for range 100 {
		lengths = append(lengths, (1+rng.IntN(2<<20/256))*256)
	}
	for _, n := range lengths {
		off := rng.IntN(64)
		p := buf[off : off+n]
		init := rng.Uint32()
		if got, want := ^crcFold512(&p[0], n, ^init), crc32.Update(init, ref, p); got != want {
			t.Fatalf("crcFold512(%d bytes at +%d, %08x) = %08x, want %08x", n, off, init, got, want)
		}
	}
}

// BenchmarkCRCFold512 is the A/B of the 256-bit fold kernel (crcFold) and
// the 512-bit one (crcFold512) on 256 KiB, the Redis port's common value,
// from the caches and from memory (as BenchmarkFoldChecksum). Each
// kernel's GB/s and the ratio.
//
//	go test -run '^$' -bench CRCFold512 -count 3 ./internal/crc32c/
func BenchmarkCRCFold512(b *testing.B) {
	if !crcHasFold512 {
		b.Log("this CPU has no AVX-512 VPCLMULQDQ")
		return
	}
	const size = 256 << 10
	for _, place := range []string{"memory", "cache"} {
		b.Run(place, func(b *testing.B) {
			nbuf := 1024 // 256 MiB
			if place == "cache" {
				nbuf = 1
			}
			bufs := filledBufs(nbuf, size)
			var took [2]time.Duration
			var sink uint32
			i := 0
			for b.Loop() {
				for k, f := range []func(*byte, int, uint32) uint32{crcFold, crcFold512} {
					p := bufs[i%nbuf]
					i++
					t0 := time.Now()
					sink += f(&p[0], size, 0)
					took[k] += time.Since(t0)
				}
			}
			reportAB(b, size, took, "fold256-GB/s", "fold512-GB/s", "512/256", sink)
		})
	}
}

// BenchmarkCopyCRCFold512 is the A/B of the fused copy and checksum with
// 256-bit registers (copyCRCFold, dst 32-byte aligned) and with 512-bit
// ones (copyChecksum512), 256 KiB a call into one 256 KiB destination, as
// a staged write of a received frame copies (non-temporal stores), from a
// source in the caches.
//
//	go test -run '^$' -bench CopyCRCFold512 -count 3 ./internal/crc32c/
func BenchmarkCopyCRCFold512(b *testing.B) {
	if !crcHasFold512 {
		b.Log("this CPU has no AVX-512 VPCLMULQDQ")
		return
	}
	const size = 256 << 10
	src := filledBufs(1, size)[0]
	dst := make([]byte, size+64)
	off := int(-uintptr(unsafe.Pointer(&dst[0])) & 63)
	d := dst[off : off+size]
	var took [2]time.Duration
	var sink uint32
	for b.Loop() {
		t0 := time.Now()
		sink += copyCRCFold(&d[0], &src[0], size, 0, true)
		t1 := time.Now()
		sink += copyChecksum512(d, src, 0, true)
		took[0] += t1.Sub(t0)
		took[1] += time.Since(t1)
	}
	reportAB(b, size, took, "fused256-GB/s", "fused512-GB/s", "512/256", sink)
}
