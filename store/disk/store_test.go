package disk

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/crc32c"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/store"
)

// tiered opens a store of memLimit bytes over a disk tier in diskDir.
func tiered(t testing.TB, dataDir, shmDir, diskDir string, memLimit int64) (*store.Store, *Tier) {
	t.Helper()
	logs := &testutil.Logs{}
	tr, err := Open(Config{Dir: diskDir, Limit: 32 * mib, RegionSize: 2 * mib, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(store.Config{DataDir: dataDir, ShmDir: shmDir, MemoryLimit: memLimit,
		MaintenanceInterval: -1, Lower: tr, Logger: logs.Logger()})
	if err != nil {
		tr.Close()
		t.Fatal(err)
	}
	return st, tr
}

func put(t testing.TB, st *store.Store, ns string, i, size int) {
	t.Helper()
	b := chunkBytes(i, size)
	w, err := st.Stage(ns, chunkID(i), int64(size), crc32c.Checksum(b))
	if err != nil {
		t.Fatalf("Stage %d: %v", i, err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		t.Fatalf("Seal %d: %v", i, err)
	}
}

func getExact(t testing.TB, st *store.Store, ns string, i, size int, lend bool) {
	t.Helper()
	get := st.Get
	if lend {
		get = st.Lend
	}
	v, err := get(ns, chunkID(i))
	if err != nil {
		t.Fatalf("get %d: %v", i, err)
	}
	defer v.Release()
	if !bytes.Equal(v.Bytes(), chunkBytes(i, size)) || v.Checksum() != crc32c.Checksum(v.Bytes()) {
		t.Fatalf("chunk %d: wrong bytes", i)
	}
}

func TestWhatTheStoreEvictsStaysHeldOnDisk(t *testing.T) {
	const size, n = 256 << 10, 40 // 10 MiB through a 2 MiB store
	st, tr := tiered(t, t.TempDir(), testutil.ShmDir(t, "disk-"), t.TempDir(), 2*mib)
	defer tr.Close()
	defer st.Close()
	for i := range n {
		put(t, st, "ns", i, size)
	}
	ids := make([]store.ID, n)
	for i := range ids {
		ids[i] = chunkID(i)
		if !st.Contains("ns", ids[i]) {
			t.Fatalf("chunk %d not held after eviction", i)
		}
	}
	held, _, err := st.Has("ns", ids, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range held {
		if !h {
			t.Fatalf("Has: chunk %d not held", i)
		}
	}
	if held, _, err := st.Has("ns", ids[:4], time.Minute); err != nil || !held[0] || !held[3] {
		t.Fatalf("a pinned Has of disk-held chunks: %v %v", held, err)
	}
	if s := st.Stats(); s.Chunks >= n || s.Evictions[store.ReasonPolicy] == 0 {
		t.Fatalf("nothing was evicted: %+v", s)
	}
	if _, err := st.Stage("ns", chunkID(0), size, 0); !errors.Is(err, store.ErrAlreadyHeld) {
		t.Fatalf("a put of a disk-held chunk: %v, want ErrAlreadyHeld", err)
	}
	for i := range n {
		getExact(t, st, "ns", i, size, i%2 == 0)
	}
	if s := st.Stats(); s.LowerHits == 0 || s.Promotions == 0 {
		t.Fatalf("no disk hits or promotions: %+v", s)
	}
	if got := len(st.Held()); got != n {
		t.Fatalf("Held lists %d chunks, want %d", got, n)
	}
	if err := st.Evict("ns", chunkID(1)); err != nil || st.Contains("ns", chunkID(1)) {
		t.Fatalf("Evict: %v, still held %v", err, st.Contains("ns", chunkID(1)))
	}
	u, err := st.DropNamespace("ns")
	if err != nil || u.Chunks < n-1 {
		t.Fatalf("DropNamespace: %+v %v", u, err)
	}
	for i := range n {
		if st.Contains("ns", chunkID(i)) {
			t.Fatalf("chunk %d held after the drop", i)
		}
	}
}

func TestDiskHeldChunksSurviveARestart(t *testing.T) {
	const size, n = 256 << 10, 40
	data, shm, disk := t.TempDir(), testutil.ShmDir(t, "disk-"), t.TempDir()
	st, tr := tiered(t, data, shm, disk, 2*mib)
	for i := range n {
		put(t, st, "ns", i, size)
	}
	st.Close()
	tr.Close()
	st, tr = tiered(t, data, shm, disk, 2*mib)
	defer tr.Close()
	defer st.Close()
	for i := range n {
		getExact(t, st, "ns", i, size, false)
	}
}

// BenchmarkStoreGetFromDisk reads chunks the store evicted to disk through
// Get (no promotion on a first read) and Lend (promoted).
func BenchmarkStoreGetFromDisk(b *testing.B) {
	for _, lend := range []bool{false, true} {
		name := "Get"
		if lend {
			name = "Lend"
		}
		b.Run(name, func(b *testing.B) {
			const size, n = 1 << 20, 14 // 4 in memory, 10 of the 16 one-chunk regions
			st, tr := tiered(b, b.TempDir(), testutil.ShmDir(b, "disk-"), b.TempDir(), 4*mib)
			defer tr.Close()
			defer st.Close()
			for i := range n {
				put(b, st, "ns", i, size)
			}
			tr.Flush()
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				get := st.Get
				if lend {
					get = st.Lend
				}
				v, err := get("ns", chunkID(i%n))
				if err != nil {
					b.Fatal(err)
				}
				v.Release()
			}
		})
	}
}

// TestPutsEvictionsAndDiskReadsAtOnce runs writers, readers (Get and Lend,
// which promote) and lookups together under the race detector, then closes
// the store while readers are still reading: every read that returns bytes
// returns the right ones, and nothing deadlocks.
func TestPutsEvictionsAndDiskReadsAtOnce(t *testing.T) {
	const size = 128 << 10
	st, tr := tiered(t, t.TempDir(), testutil.ShmDir(t, "disk-"), t.TempDir(), 2*mib)
	defer tr.Close()
	var written atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		wg.Go(func() {
			for i := w; i < 200; i += 2 {
				b := chunkBytes(i, size)
				s, err := st.Stage("ns", chunkID(i), size, crc32c.Checksum(b))
				if err != nil {
					continue // closed, busy or no room: not held, fine
				}
				if _, err := s.Write(b); err != nil {
					s.Abort()
					continue
				}
				if s.Seal() == nil {
					written.Add(1)
				}
			}
		})
	}
	for r := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := rng.IntN(200)
				get := st.Get
				if r == 0 {
					get = st.Lend
				}
				if r == 2 {
					st.Has("ns", []store.ID{chunkID(i), chunkID(i + 1)}, 0)
					continue
				}
				v, err := get("ns", chunkID(i))
				if err != nil {
					continue
				}
				// Under the fault guard: Close may unmap the View's segment
				// meanwhile (a View must not be read after Close).
				var same bool
				if v.Read(func(b []byte) { same = bytes.Equal(b, chunkBytes(i, size)) }) == nil && !same {
					t.Errorf("chunk %d: wrong bytes", i)
				}
				v.Release()
			}
		})
	}
	testutil.Eventually(t, "the writers to write", 60*time.Second, func() bool { return written.Load() >= 100 })
	if err := st.Close(); err != nil {
		t.Error(err)
	}
	close(stop)
	wg.Wait()
}

// BenchmarkPutEvicting puts 256 KiB chunks into a full store, each put
// evicting one chunk: without a disk tier, and with one (the evicted chunk
// is copied into the tier's queue on the put's goroutine). The difference
// is what the tier costs a DRAM put.
func BenchmarkPutEvicting(b *testing.B) {
	for _, withDisk := range []bool{false, true} {
		name := "dram-only"
		if withDisk {
			name = "with-disk"
		}
		b.Run(name, func(b *testing.B) {
			const size = 256 << 10
			logs := &testutil.Logs{}
			cfg := store.Config{DataDir: b.TempDir(), ShmDir: testutil.ShmDir(b, "disk-"), MemoryLimit: 16 * mib,
				MaintenanceInterval: -1, Logger: logs.Logger()}
			if withDisk {
				tr, err := Open(Config{Dir: b.TempDir(), Limit: 1 << 30, Logger: logs.Logger()})
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Close()
				cfg.Lower = tr
			}
			st, err := store.Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			src := chunkBytes(1, size)
			crc := crc32c.Checksum(src)
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var id store.ID
				id[0], id[1], id[2], id[3] = byte(i), byte(i>>8), byte(i>>16), 0xee
				w, err := st.Stage("ns", id, size, crc)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := w.Write(src); err != nil {
					b.Fatal(err)
				}
				if err := w.Seal(); err != nil {
					b.Fatal(err)
				}
				if withDisk && i%64 == 63 {
					b.StopTimer()
					cfg.Lower.(*Tier).Flush() // keep the queue from filling: measure the put, not drops
					b.StartTimer()
				}
			}
		})
	}
}
