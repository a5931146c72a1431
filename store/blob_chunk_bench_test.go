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

// BenchmarkBlobChecksumParts is the A/B of Config.ChecksumParts on one
// store: per iteration a blob (2, 8, 32 MiB) is written by another
// goroutine (one copy, as an engine writes it: from 1 MiB on, Go's copy
// leaves the bytes in memory rather than the caches) and checksummed once
// in one pass and once split in two, in turn. It reports each way's µs per
// checksum and their ratio.
//
//	go test -run '^$' -bench BlobChecksumParts -count 3 ./store/
func BenchmarkBlobChecksumParts(b *testing.B) {
	for _, size := range []int{2 << 20, 8 << 20, 32 << 20} {
		b.Run(byteSize(size), func(b *testing.B) { benchChecksumParts(b, size) })
	}
}

func benchChecksumParts(b *testing.B, size int) {
	s := openTest(b, testConfig(b, 96<<20))
	bl, err := s.CreateBlob(int64(size))
	if err != nil {
		b.Fatal(err)
	}
	defer bl.Free()
	src := payload(testID(1), size)
	var took [2]time.Duration
	write, written := make(chan struct{}), make(chan struct{})
	defer close(write)
	go func() {
		for range write {
			copy(bl.Bytes(), src)
			written <- struct{}{}
		}
	}()
	for b.Loop() {
		for k, parts := range []int{1, 2} {
			write <- struct{}{}
			<-written
			t0 := time.Now()
			if _, err := guardedChecksumParts(bl.Bytes(), parts); err != nil {
				b.Fatal(err)
			}
			took[k] += time.Since(t0)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(took[0].Microseconds())/n, "parts1-µs")
	b.ReportMetric(float64(took[1].Microseconds())/n, "parts2-µs")
	b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "parts1/parts2")
}
