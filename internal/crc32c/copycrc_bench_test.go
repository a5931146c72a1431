package crc32c

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// BenchmarkCopyCRC32C measures, per frame size, a plain copy, copy then
// crc32.Update (two passes) and copyCRC32C (fused), each into a rotation over
// a 256 MiB already-touched destination with the source reused, as
// store's BenchmarkStageSeal's copy baseline does. Compare the MB/s of fused/X with
// copy/X.
func BenchmarkCopyCRC32C(b *testing.B) {
	const workingSet = 256 << 20
	dst := make([]byte, workingSet)
	for i := range dst {
		dst[i] = 1
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{256 << 10, 2 << 20, 8 << 20} {
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		n := workingSet / size
		name := fmt.Sprintf("/%dKiB", size>>10)
		if size >= 1<<20 {
			name = fmt.Sprintf("/%dMiB", size>>20)
		}
		var sink uint32
		b.Run("copy"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for i := 0; b.Loop(); i++ {
				off := (i % n) * size
				copy(dst[off:off+size], src)
			}
		})
		b.Run("twopass"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for i := 0; b.Loop(); i++ {
				off := (i % n) * size
				copy(dst[off:off+size], src)
				sink += crc32.Update(0, tab, src)
			}
		})
		b.Run("fused"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for i := 0; b.Loop(); i++ {
				off := (i % n) * size
				sink += copyCRC32C(dst[off:off+size], src, 0)
			}
		})
		_ = sink
	}
}
