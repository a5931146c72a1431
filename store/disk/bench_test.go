package disk

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/internal/crc32c"
	"github.com/kvring/kvring/store"
)

// Benchmarks of the tier against its directory's disk. scripts/disk-bench.sh
// runs them next to fio (same directory, block size and queue depth) and
// prints the ratios. KVRING_DISK_BENCH_DIR names the directory (default a
// temporary one); KVRING_DISK_BENCH_QD the read queue depth (default 1).

func benchDir(b *testing.B) string {
	if d := os.Getenv("KVRING_DISK_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "kvring-disk-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

func benchQD() int {
	if n, err := strconv.Atoi(os.Getenv("KVRING_DISK_BENCH_QD")); err == nil && n > 0 {
		return n
	}
	return 1
}

func benchTier(b *testing.B, dir string) *Tier {
	tr, err := Open(Config{Dir: dir, Limit: 4 << 30, RegionSize: 64 << 20, QueueBytes: 64 << 20,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tr.Close() })
	return tr
}

var benchSizes = []int{256 << 10, 2 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// BenchmarkWrite offloads chunks back to back and counts the bytes once
// they are on disk: sequential direct writes, batched by the writer.
func BenchmarkWrite(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			tr := benchTier(b, benchDir(b))
			src := chunkBytes(1, size)
			crc := crc32c.Checksum(src)
			fill := func(dst []byte) error { copy(dst, src); return nil }
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := store.ID{}
				id[0], id[1], id[2], id[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
				for !tr.Offload("bench", id, crc, size, nil, fill) {
					tr.waitBatch() // the queue is full: wait for the disk, as a steady state would
				}
			}
			tr.Flush()
			b.StopTimer()
			if d := tr.Stats().Drops[DropIOError]; d > 0 {
				b.Fatalf("%d writes failed", d)
			}
		})
	}
}

// waitBatch blocks until the writer finished a batch (or the queue is
// empty): room in the queue, without draining it as Flush does, so that
// the writer always has the next batch waiting.
func (t *Tier) waitBatch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.queued > 0 {
		t.idle.Wait()
	}
}

// BenchmarkRead reads random chunks of a 512 MiB data set written first,
// from KVRING_DISK_BENCH_QD goroutines at once.
func BenchmarkRead(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			tr := benchTier(b, benchDir(b))
			n := (512 << 20) / size
			src := chunkBytes(1, size)
			crc := crc32c.Checksum(src)
			fill := func(dst []byte) error { copy(dst, src); return nil }
			ids := make([]store.ID, n)
			for i := range ids {
				ids[i][0], ids[i][1], ids[i][2] = byte(i), byte(i>>8), 0xbe
				for !tr.Offload("bench", ids[i], crc, size, nil, fill) {
					tr.Flush()
				}
			}
			tr.Flush()
			qd := benchQD()
			b.SetBytes(int64(size))
			b.ResetTimer()
			var wg sync.WaitGroup
			for g := range qd {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 1))
					for i := g; i < b.N; i += qd {
						c, err := tr.Read("bench", ids[r.IntN(n)], true)
						if err != nil {
							b.Error(err)
							return
						}
						c.Release()
					}
				})
			}
			wg.Wait()
		})
	}
}

// benchFill puts 512 MiB of chunks of size bytes into st and returns the
// ids of those the tier holds once its queue is written out (not those
// still in shared memory only: Tier.Read does not see them, and Lend
// would serve them from memory).
func benchFill(b *testing.B, st *store.Store, tr *Tier, size int) []store.ID {
	src := chunkBytes(1, size)
	crc := crc32c.Checksum(src)
	var ids []store.ID
	for i := range (512 << 20) / size {
		var id store.ID
		id[0], id[1], id[2] = byte(i), byte(i>>8), 0xbf
		w, err := st.Stage("bench", id, int64(size), crc)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Write(src); err != nil {
			b.Fatal(err)
		}
		if err := w.Seal(); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
		if i%64 == 63 {
			tr.Flush() // keep the queue from dropping offloads
		}
	}
	tr.Flush()
	held := ids[:0]
	for _, id := range ids {
		if tr.Contains("bench", id) {
			held = append(held, id)
		}
	}
	if len(held) < len(ids)/2 {
		b.Fatalf("only %d of %d chunks held", len(held), len(ids))
	}
	return held
}

// BenchmarkWritePaired: offloads of 64 MiB of chunks (counted once on
// disk) paired with a plain Go loop of O_DIRECT sequential pwrites of the
// same 64 MiB in chunk-size writes into a preallocated file of the same
// directory (what fio's psync sequential-write job does), one after the
// other, eight pairs. write/pwrite_paired is the pwrite loop's time over
// the tier's: free of the host's drift between rounds, which moves fio's
// figures (scripts/disk-bench.sh) by ±50 % from one round to the next.
func BenchmarkWritePaired(b *testing.B) {
	const rounds, per = 8, 64 << 20
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			dir := benchDir(b)
			tr := benchTier(b, dir)
			src := chunkBytes(1, size)
			crc := crc32c.Checksum(src)
			fill := func(dst []byte) error { copy(dst, src); return nil }
			fd, err := openFile(filepath.Join(dir, "pwrite.dat"), unix.O_RDWR|unix.O_CREAT, tr.Direct())
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Close(fd)
			if err := unix.Fallocate(fd, 0, 0, rounds*per); err != nil {
				b.Fatal(err)
			}
			buf := alignedBuf(int64(size))
			copy(buf, src)
			var tierT, plainT time.Duration
			n := 0
			for r := range rounds {
				t0 := time.Now()
				for range per / size {
					n++
					id := store.ID{byte(n), byte(n >> 8), byte(n >> 16), 0xbd}
					for !tr.Offload("bench", id, crc, size, nil, fill) {
						tr.waitBatch()
					}
				}
				tr.Flush()
				t1 := time.Now()
				for off := r * per; off < (r+1)*per; off += size {
					if err := pwritevFull(fd, [][]byte{buf}, int64(off)); err != nil {
						b.Fatal(err)
					}
				}
				plainT += time.Since(t1)
				tierT += t1.Sub(t0)
			}
			if d := tr.Stats().Drops[DropIOError]; d > 0 {
				b.Fatalf("%d writes failed", d)
			}
			b.ReportMetric(rounds*per/tierT.Seconds()/1e6, "write_MB/s")
			b.ReportMetric(rounds*per/plainT.Seconds()/1e6, "pwrite_MB/s")
			b.ReportMetric(plainT.Seconds()/tierT.Seconds(), "write/pwrite_paired")
		})
	}
}
