package store

import (
	"testing"
	"time"
)

// BenchmarkBlobToChunk creates a blob, stages it as a chunk in place and
// seals it, with the budget full (every blob evicts an older chunk), as
// the local socket's publish does on a node that owns the chunk.
//
//	go test -run '^$' -bench BlobToChunk ./store/
func BenchmarkBlobToChunk(b *testing.B) {
	for _, size := range []int{256 << 10, 2 << 20} {
		b.Run(byteSize(size), func(b *testing.B) {
			s := openTest(b, testConfig(b, 64<<20))
			var create, stage, seal time.Duration
			b.SetBytes(int64(size))
			i := uint64(0)
			for b.Loop() {
				i++
				t0 := time.Now()
				bl, err := s.CreateBlob(int64(size))
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				sum, err := bl.Checksum()
				if err != nil {
					b.Fatal(err)
				}
				w, err := bl.StageChunk("ns", testID(i), sum)
				if err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if err := w.Seal(); err != nil {
					b.Fatal(err)
				}
				bl.Free()
				t3 := time.Now()
				create += t1.Sub(t0)
				stage += t2.Sub(t1)
				seal += t3.Sub(t2)
			}
			n := time.Duration(b.N)
			b.ReportMetric(float64(create/n)/1e3, "create-µs")
			b.ReportMetric(float64(stage/n)/1e3, "checksum+stage-µs")
			b.ReportMetric(float64(seal/n)/1e3, "seal+free-µs")
		})
	}
}

func byteSize(n int) string {
	if n >= 1<<20 {
		return itoa(n>>20) + "MiB"
	}
	return itoa(n>>10) + "KiB"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
