package store

import (
	"fmt"
	"testing"
)

// BenchmarkRestart: the time Open takes to recover a store of n chunks of
// 4 KiB from its catalog and shared-memory segments (a restart after
// SIGTERM; node start adds the network around it). The store is filled
// once per size; each iteration closes and reopens it.
//
//	go test -run '^$' -bench Restart -benchtime 3x ./store/
func BenchmarkRestart(b *testing.B) {
	for _, n := range []int{100_000, 250_000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			const size = 4 << 10
			cfg := testConfig(b, int64(n)*size*2)
			cfg.MaxStagedBytes = 64 << 20
			s := openTest(b, cfg)
			data := make([]byte, size)
			for i := range n {
				copy(data, fmt.Sprintf("chunk %d", i))
				mustPut(b, s, "ns", testID(uint64(i)), data)
			}
			b.ResetTimer()
			for range b.N {
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				var err error
				s, err = Open(cfg)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			if got := s.Stats().Chunks; got != int64(n) {
				b.Fatalf("%d chunks after restart, want %d", got, n)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/chunk")
		})
	}
}
