package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"
)

// TestFoldChecksumMatchesHashCRC32: the fold kernel's CRC-32C equals
// hash/crc32's for random lengths (around the kernels' 128- and 256-byte
// steps and their minimums), unaligned starts and initial values. Where
// the CPU has the 512-bit kernel every length from fold512Min runs it.
func TestFoldChecksumMatchesHashCRC32(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(14, 3))
	ref := crc32.MakeTable(crc32.Castagnoli)
	buf := make([]byte, 3<<20+64)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 127, 128, 129, foldChecksumMin - 1, foldChecksumMin, foldChecksumMin + 1, 383, 384, 385,
		fold512Min - 1, fold512Min, fold512Min + 1, fold512Min + 127, fold512Min + 128, fold512Min + 255,
		fold512Min + 256, fold512Min + 257, 1 << 20, 3 << 20}
	for range 300 {
		lengths = append(lengths, rng.IntN(4096), rng.IntN(3<<20))
	}
	for _, n := range lengths {
		off := rng.IntN(64)
		p := buf[off : off+n]
		init := rng.Uint32()
		if got, want := foldChecksum(init, p), crc32.Update(init, ref, p); got != want {
			t.Fatalf("foldChecksum(%08x, %d bytes at +%d): %08x, want %08x", init, n, off, got, want)
		}
		if got, want := foldChecksum(0, p), crc32.Checksum(p, ref); got != want {
			t.Fatalf("foldChecksum(0, %d bytes at +%d): %08x, want %08x", n, off, got, want)
		}
	}
}

// BenchmarkFoldChecksum is the A/B of hash/crc32 (tableChecksum) and the
// fold kernel (foldChecksum) on 2 MiB: from memory (each pass over another
// of 128 buffers, 256 MiB in all, far more than the caches) and from the
// caches (the same buffer again and again). Each way's GB/s and the ratio.
//
//	go test -run '^$' -bench FoldChecksum -count 3 ./internal/crc32c/
func BenchmarkFoldChecksum(b *testing.B) {
	const size = 2 << 20
	for _, place := range []string{"memory", "cache"} {
		b.Run(place, func(b *testing.B) {
			nbuf := 128
			if place == "cache" {
				nbuf = 1
			}
			bufs := filledBufs(nbuf, size)
			var took [2]time.Duration
			var sink uint32
			i := 0
			for b.Loop() {
				for k, f := range []func(uint32, []byte) uint32{tableChecksum, foldChecksum} {
					p := bufs[i%nbuf]
					i++
					t0 := time.Now()
					sink += f(0, p)
					took[k] += time.Since(t0)
				}
			}
			reportAB(b, size, took, "crc32-GB/s", "fold-GB/s", "fold/crc32", sink)
		})
	}
}

// reportAB reports an A/B benchmark of size-byte calls: each side's GB/s
// from its total time (took: A, B) and A's time over B's; sink, the
// results summed, keeps the calls from being optimised away.
func reportAB(b *testing.B, size int, took [2]time.Duration, a, bName, ratio string, sink uint32) {
	gb := float64(size) * float64(b.N) / 1e9
	b.ReportMetric(gb/took[0].Seconds(), a)
	b.ReportMetric(gb/took[1].Seconds(), bName)
	b.ReportMetric(took[0].Seconds()/took[1].Seconds(), ratio)
	if sink == 1 {
		b.Log(sink)
	}
}

// filledBufs returns n buffers of size bytes, each filled with its own
// pattern: the inputs of the checksum benchmarks.
func filledBufs(n, size int) [][]byte {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, size)
		for k := range bufs[i] {
			bufs[i][k] = byte(k*7 + i)
		}
	}
	return bufs
}
