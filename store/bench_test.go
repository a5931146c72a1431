package store

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

var benchSizes = []int{256 << 10, 2 << 20, 8 << 20}

// benchWorkingSet is the bytes a write benchmark cycles through, so neither
// the store nor the plain copy runs out of the CPU cache.
const benchWorkingSet = 256 << 20

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// BenchmarkStageSeal measures a confirmed local write (stage, one copy with
// the checksum computed in the same pass, seal, plus evicting the chunk the
// slot held before) beside a plain copy of the same bytes into the same
// amount of already-touched memory. Compare the MB/s of store/X and copy/X.
func BenchmarkStageSeal(b *testing.B) {
	for _, size := range benchSizes {
		n := benchWorkingSet / size
		src := payload(testID(0), size)
		crc := Checksum(src)
		b.Run("copy/"+sizeName(size), func(b *testing.B) {
			dst := make([]byte, benchWorkingSet)
			for i := range dst {
				dst[i] = 1
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := (i % n) * size
				copy(dst[off:off+size], src)
			}
		})
		b.Run("store/"+sizeName(size), func(b *testing.B) {
			cfg := testConfig(b, int64(benchWorkingSet))
			cfg.ExpectedChunkSize = int64(size)
			s := openTest(b, cfg)
			for i := 0; i < n; i++ {
				mustPut(b, s, "bench", testID(uint64(i)), src)
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				old := testID(uint64(i))
				if err := s.evict("bench", old); err != nil {
					b.Fatal(err)
				}
				if err := s.put("bench", testID(uint64(i+n)), src, crc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGet measures Acquire (index lookup, a view of the shared memory,
// no copy) and Get (the same plus a checksum pass over the bytes), each with
// Release. MB/s is the equivalent bandwidth.
func BenchmarkGet(b *testing.B) {
	for _, verify := range []bool{false, true} {
		for _, size := range benchSizes {
			name := "view/"
			if verify {
				name = "verified/"
			}
			b.Run(name+sizeName(size), func(b *testing.B) {
				n := benchWorkingSet / size
				cfg := testConfig(b, int64(benchWorkingSet))
				cfg.ExpectedChunkSize = int64(size)
				s := openTest(b, cfg)
				ids := make([]ID, n)
				for i := range ids {
					ids[i] = testID(uint64(i))
					mustPut(b, s, "bench", ids[i], payload(ids[i], size))
				}
				b.SetBytes(int64(size))
				b.ResetTimer()
				get := s.acquire
				if verify {
					get = s.Get
				}
				for i := 0; i < b.N; i++ {
					v, err := get("bench", ids[i%n])
					if err != nil {
						b.Fatal(err)
					}
					v.Release()
				}
			})
		}
	}
}

// BenchmarkIndexMemory reports the Go heap bytes per held chunk: index entry,
// index map, ristretto's item and policy state and frequency sketch, and the
// arena's per-slot state. Chunk bytes live in shared memory and are not
// counted.
func BenchmarkIndexMemory(b *testing.B) {
	const chunks = 200_000
	const size = 64
	for i := 0; i < b.N; i++ {
		cfg := testConfig(b, chunks*size)
		cfg.ExpectedChunkSize = size
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := openTest(b, cfg)
		data := make([]byte, size)
		crc := Checksum(data)
		for j := 0; j < chunks; j++ {
			if err := s.put("bench", testID(uint64(j)), data, crc); err != nil {
				b.Fatal(err)
			}
		}
		s.pol.wait()
		if err := s.FlushCatalog(); err != nil { // queued catalog writes are transient
			b.Fatal(err)
		}
		runtime.GC()
		runtime.GC() // twice: sync.Pool caches (bbolt's page buffers) survive one
		runtime.ReadMemStats(&after)
		held := s.Stats().Chunks
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(held), "heap-B/chunk")
		b.ReportMetric(float64(held), "chunks")
		runtime.KeepAlive(s)
		s.Close()
	}
}

// BenchmarkAllocatorWaste fills a store to twice its budget (so the policy
// evicts and slots are reused) with uniform and mixed sizes and reports
// allocator waste (slot bytes not holding payload) as a share of the bytes in
// use, and how full the budget is.
func BenchmarkAllocatorWaste(b *testing.B) {
	cases := []struct {
		name     string
		min, max int
	}{
		{"uniform-256KiB", 256 << 10, 256 << 10},
		{"uniform-2MiB", 2 << 20, 2 << 20},
		{"uniform-2.3MiB-odd", 2411731, 2411731},
		{"uniform-8MiB", 8 << 20, 8 << 20},
		{"mixed-256KiB-8MiB", 256 << 10, 8 << 20},
	}
	const limit = 512 << 20
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cfg := testConfig(b, limit)
				cfg.ExpectedChunkSize = int64(c.min)
				s := openTest(b, cfg)
				rng := rand.New(rand.NewPCG(1, 2))
				var put int64
				for j := uint64(0); put < 2*limit; j++ {
					size := c.min + rng.IntN(c.max-c.min+1)
					w, err := s.Stage("bench", testID(j), int64(size), 0)
					if err != nil {
						continue
					}
					clear(w.Bytes())
					put += int64(size)
					w.e.crc = Checksum(w.Bytes()) // bytes are zero: skip hashing random data
					if err := w.Seal(); err != nil {
						b.Fatal(err)
					}
				}
				s.pol.wait()
				st := s.Stats()
				b.ReportMetric(100*float64(st.WasteBytes())/float64(st.UsedBytes), "waste-%")
				b.ReportMetric(100*float64(st.UsedBytes)/float64(st.LimitBytes), "used-%")
				b.ReportMetric(100*float64(st.ResidentBytes)/float64(st.LimitBytes), "resident-%")
				s.Close()
			}
		})
	}
}

// BenchmarkStageSealFresh measures confirmed local writes into slots that
// have never held a chunk, whose pages the kernel must first allocate and
// zero: a new node's first writes, and every write after a slot's pages
// were given back. prefault does it in one call per write; faulting leaves
// it to the copy, a page fault per 4 KiB page. A store is filled up to
// its limit and then replaced by a new one, untimed.
func BenchmarkStageSealFresh(b *testing.B) {
	for _, size := range []int64{2 << 20, 32 << 10} {
		for _, mode := range []string{"prefault", "faulting"} {
			b.Run(mode+"/"+sizeName(int(size)), func(b *testing.B) {
				benchStageSealFresh(b, size, mode == "faulting")
			})
		}
	}
}

func benchStageSealFresh(b *testing.B, size int64, faulting bool) {
	const limit = 512 << 20
	src := payload(testID(0), int(size))
	crc := Checksum(src)
	var s *Store
	open := func() {
		if s != nil {
			s.Close()
		}
		cfg := testConfig(b, limit)
		cfg.ExpectedChunkSize = size
		s = openTest(b, cfg)
		s.noPrefault.Store(faulting)
	}
	open()
	b.SetBytes(size)
	for i := int64(0); b.Loop(); i++ {
		if i%(limit/size) == 0 && i > 0 {
			b.StopTimer()
			open()
			b.StartTimer()
		}
		if err := s.put("bench", testID(uint64(i)), src, crc); err != nil {
			b.Fatal(err)
		}
	}
}
