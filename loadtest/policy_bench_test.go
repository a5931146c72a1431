package loadtest

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvring/kvring/loadtest/trace"
	"github.com/kvring/kvring/store"
)

// tracePath finds the Mooncake trace shipped as test data (or $KVRING_TRACE).
func tracePath(tb testing.TB) string {
	if p := os.Getenv("KVRING_TRACE"); p != "" {
		return p
	}
	return filepath.Join("trace", "testdata", "synthetic_trace.jsonl")
}

// blockID maps a trace block number to a chunk id.
func blockID(n int64) store.ID {
	var id store.ID
	binary.LittleEndian.PutUint64(id[:], uint64(n))
	binary.LittleEndian.PutUint64(id[8:], uint64(n)*0x9E3779B97F4A7C15)
	return id
}

// storePolicy replays blocks through a real store: a block is a hit when Get
// finds it; a miss is put (and may be rejected by the admission policy).
type storePolicy struct {
	s     *store.Store
	data  []byte
	crc   uint32
	puts  int
	rejct int
}

func (p *storePolicy) Access(n int64) bool {
	id := blockID(n)
	if v, err := p.s.Get("trace", id); err == nil {
		v.Release()
		return true
	}
	p.puts++
	if err := p.s.Put("trace", id, p.data, p.crc); err != nil {
		p.rejct++
	}
	return false
}

// BenchmarkPolicyReplay replays the Mooncake trace (one block = one chunk of
// blockSize bytes) through the store with a budget of 5 % and 10 % of the
// distinct blocks, beside an LRU of the same capacity, and reports both hit
// ratios and their ratio.
func BenchmarkPolicyReplay(b *testing.B) {
	reqs, err := trace.ReadFile(tracePath(b))
	if err != nil {
		b.Fatal(err)
	}
	sum := trace.Stats(reqs)
	const blockSize = 16 << 10
	for _, pct := range []int{5, 10} {
		capacity := sum.DistinctIDs * pct / 100
		b.Run(fmt.Sprintf("budget=%d%%", pct), func(b *testing.B) {
			var storeHit, lruHit float64
			for i := 0; i < b.N; i++ {
				shm, err := os.MkdirTemp("/dev/shm", "kvring-bench-")
				if err != nil {
					b.Fatal(err)
				}
				s, err := store.Open(store.Config{
					DataDir:             b.TempDir(),
					ShmDir:              shm,
					MemoryLimit:         int64(capacity) * blockSize,
					ExpectedChunkSize:   blockSize,
					MaintenanceInterval: -1,
					Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
				})
				if err != nil {
					b.Fatal(err)
				}
				data := make([]byte, blockSize)
				p := &storePolicy{s: s, data: data, crc: store.Checksum(data)}
				hits, total := trace.Replay(reqs, p)
				storeHit = float64(hits) / float64(total)
				lh, lt := trace.Replay(reqs, trace.NewLRU(capacity))
				lruHit = float64(lh) / float64(lt)
				b.Logf("capacity %d blocks: store %.4f (puts %d, rejected %d), LRU %.4f, static frequency oracle %.4f, optimum %.4f",
					capacity, storeHit, p.puts, p.rejct, lruHit, trace.StaticOracle(reqs, capacity), trace.Belady(reqs, capacity))
				s.Close()
				os.RemoveAll(shm)
			}
			b.ReportMetric(storeHit, "store-hit")
			b.ReportMetric(lruHit, "lru-hit")
			b.ReportMetric(storeHit/lruHit, "ratio")
		})
	}
}
