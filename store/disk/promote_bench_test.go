package disk

import (
	"io"
	"log/slog"
	"math"
	"testing"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/store"
)

// BenchmarkPromotePaths: gets (store.Lend) of disk-held chunks through the
// two ways a promotion can read them, paired op by op on one goroutine
// (queue depth 1) for three one-second rounds, so that both see the same
// moments of the disk: "direct", the payload read with O_DIRECT straight
// into the new shared-memory slot and checksummed at the seal (ReadInto, at
// any size), and "copy", read into the tier's reused buffer and copied into
// the slot with its checksum in the same pass (Read, then the store's
// Write). copy/direct is the copy path's summed time over the direct
// one's: below 1 the copy pays. Two stores of 8 MiB of shared memory share
// one tier holding 512 MiB of chunks.
//
//	KVRING_DISK_BENCH_DIR=/var/tmp go test -run '^$' -bench PromotePaths -benchtime 1x ./store/disk
func BenchmarkPromotePaths(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			logs := slog.New(slog.NewTextHandler(io.Discard, nil))
			tr, err := Open(Config{Dir: benchDir(b), Limit: 4 << 30, RegionSize: 64 << 20, QueueBytes: 64 << 20, Logger: logs})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			open := func(low store.Lower) *store.Store {
				st, err := store.Open(store.Config{DataDir: b.TempDir(), ShmDir: testutil.ShmDir(b, "disk-bench-"),
					MemoryLimit: 8 << 20, MaintenanceInterval: -1, Lower: low, Logger: logs})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { st.Close() })
				return st
			}
			direct, copied := open(uncapped{tr}), open(copying{tr})
			ids := benchFill(b, direct, tr, size)
			var pt pairTimes
			for range 3 {
				pt.add(readPairs(b, 1, func(id store.ID) error { return lendOnce(direct, id) },
					func(id store.ID) error { return lendOnce(copied, id) }, ids))
			}
			b.ReportMetric(pt.b.Seconds()/pt.a.Seconds(), "copy/direct")
		})
	}
}

// uncapped is a Tier that offers every aligned payload to ReadInto, at any
// size (the direct path).
type uncapped struct{ *Tier }

func (u uncapped) SizeInto(ns string, id store.ID) (int64, bool) {
	return u.sizeInto(ns, id, math.MaxUint32)
}

// copying is a Tier seen only as a store.Lower: the store promotes through
// Read and its own copy (the copy path).
type copying struct{ store.Lower }
