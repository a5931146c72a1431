package loadtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvring/kvring/internal/testutil"
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

// blockID maps a trace block (or chunk) number to a chunk id.
func blockID(n int64) store.ID {
	var id store.ID
	binary.LittleEndian.PutUint64(id[:], uint64(n))
	binary.LittleEndian.PutUint64(id[8:], uint64(n)*0x9E3779B97F4A7C15)
	return id
}

// policyStore opens a store of capacity chunks of size bytes under policy.
func policyStore(b *testing.B, policy string, capacity, size int) *store.Store {
	shm := testutil.ShmDir(b, "bench-")
	s, err := store.Open(store.Config{
		DataDir:             b.TempDir(),
		ShmDir:              shm,
		MemoryLimit:         int64(capacity) * int64(size),
		ExpectedChunkSize:   int64(size),
		Policy:              policy,
		MaintenanceInterval: -1,
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// putChunk stages, writes and seals one chunk, as a node's write path does.
func putChunk(s *store.Store, ns string, id store.ID, data []byte, crc uint32) error {
	w, err := s.Stage(ns, id, int64(len(data)), crc)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	return w.Seal()
}

// leading is the length of the run of true at the start of held.
func leading(held []bool) int {
	n := 0
	for n < len(held) && held[n] {
		n++
	}
	return n
}

// storePolicy replays blocks through a real store: a block is a hit when Get
// finds it; a miss is put (and may be rejected by the admission policy).
type storePolicy struct {
	s     *store.Store
	ns    string // "trace" when empty
	data  []byte
	crc   uint32
	puts  int
	rejct int
}

func (p *storePolicy) Access(n int64) bool {
	id := blockID(n)
	ns := p.ns
	if ns == "" {
		ns = "trace"
	}
	if v, err := p.s.Get(ns, id); err == nil {
		v.Release()
		return true
	}
	p.puts++
	if err := putChunk(p.s, ns, id, p.data, p.crc); err != nil {
		p.rejct++
	}
	return false
}

// BenchmarkPolicyReplay replays the Mooncake trace (one block = one chunk of
// blockSize bytes, every block an independent access, as in the trace's
// reference figures) through the store under each eviction policy with a
// budget of 5 % and 10 % of the distinct blocks, beside an LRU of the same
// capacity, and reports both hit ratios and their ratio.
func BenchmarkPolicyReplay(b *testing.B) {
	reqs, err := trace.ReadFile(tracePath(b))
	if err != nil {
		b.Fatal(err)
	}
	sum := trace.Stats(reqs)
	const blockSize = 16 << 10
	for _, policy := range []string{store.PolicyLRU, store.PolicyTinyLFU} {
		for _, pct := range []int{5, 10} {
			capacity := sum.DistinctIDs * pct / 100
			b.Run(fmt.Sprintf("policy=%s/budget=%d%%", policy, pct), func(b *testing.B) {
				var storeHit, lruHit float64
				for i := 0; i < b.N; i++ {
					s := policyStore(b, policy, capacity, blockSize)
					data := make([]byte, blockSize)
					p := &storePolicy{s: s, data: data, crc: store.Checksum(data)}
					hits, total := trace.Replay(reqs, p)
					storeHit = float64(hits) / float64(total)
					lh, lt := trace.Replay(reqs, trace.NewLRU(capacity))
					lruHit = float64(lh) / float64(lt)
					b.Logf("capacity %d blocks: store %.4f (puts %d, rejected %d), LRU %.4f, static frequency oracle %.4f, optimum %.4f",
						capacity, storeHit, p.puts, p.rejct, lruHit, trace.StaticOracle(reqs, capacity), trace.Belady(reqs, capacity))
				}
				b.ReportMetric(storeHit, "store-hit")
				b.ReportMetric(lruHit, "lru-hit")
				b.ReportMetric(storeHit/lruHit, "ratio")
			})
		}
	}
}

// chunkKeys numbers every chunk of every request at chunkTokens per chunk:
// block id × 64 + the chunk's index in its block (at most 32 per block).
func chunkKeys(reqs []trace.Request, chunkTokens int) (keys [][]int64, distinct int) {
	seen := make(map[int64]struct{})
	for _, r := range reqs {
		var ks []int64
		for i, block := range r.HashIDs {
			bt := r.BlockTokenCount(i)
			for j := 0; j*chunkTokens < bt; j++ {
				k := block<<6 | int64(j)
				ks = append(ks, k)
				seen[k] = struct{}{}
			}
		}
		keys = append(keys, ks)
	}
	return keys, len(seen)
}

// BenchmarkPolicyPrefixReplay replays the Mooncake trace the way engines use
// kvring: each 512-token block is 32 chunks of 16 tokens; per request, Has
// tells which chunks are held and the leading run of them counts (only those
// are hits, as for an engine's lookup), the held prefix is read and the rest
// is put. Budget: 5 % of the distinct chunks.
// Beside the store under each policy, an exact LRU over the same requests.
// Under tinylfu every write into a full store waits for ristretto's decision:
// that sub-benchmark takes about ten minutes on a 2-vCPU machine.
func BenchmarkPolicyPrefixReplay(b *testing.B) {
	reqs, err := trace.ReadFile(tracePath(b))
	if err != nil {
		b.Fatal(err)
	}
	const chunkTokens, chunkSize = 16, 1 << 10
	keys, distinct := chunkKeys(reqs, chunkTokens)
	capacity := distinct * 5 / 100
	for _, policy := range []string{store.PolicyLRU, store.PolicyTinyLFU} {
		b.Run("policy="+policy, func(b *testing.B) {
			var storeHit, lruHit float64
			for i := 0; i < b.N; i++ {
				s := policyStore(b, policy, capacity, chunkSize)
				data := make([]byte, chunkSize)
				crc := store.Checksum(data)
				ref := trace.NewLRU(capacity)
				var hits, refHits, total, rejected int
				ids := make([]store.ID, 0, 1024)
				for _, ks := range keys {
					ids = ids[:0]
					for _, k := range ks {
						ids = append(ids, blockID(k))
					}
					held, _, err := s.Has("trace", ids, 0)
					if err != nil {
						b.Fatal(err)
					}
					n := leading(held)
					for _, id := range ids[:n] {
						if v, err := s.Get("trace", id); err == nil {
							v.Release()
						}
					}
					for _, id := range ids[n:] {
						// Already held (behind the first missing chunk) is not a refusal.
						if err := putChunk(s, "trace", id, data, crc); err != nil && !errors.Is(err, store.ErrAlreadyHeld) {
							rejected++
						}
					}
					m := 0
					for m < len(ks) && ref.Contains(ks[m]) {
						m++
					}
					for _, k := range ks {
						ref.Access(k)
					}
					hits += n
					refHits += m
					total += len(ks)
				}
				storeHit = float64(hits) / float64(total)
				lruHit = float64(refHits) / float64(total)
				b.Logf("capacity %d of %d distinct chunks: store %.4f (%d puts refused), exact LRU %.4f",
					capacity, distinct, storeHit, rejected, lruHit)
			}
			b.ReportMetric(storeHit, "store-hit")
			b.ReportMetric(lruHit, "lru-hit")
			b.ReportMetric(storeHit/lruHit, "ratio")
		})
	}
}
