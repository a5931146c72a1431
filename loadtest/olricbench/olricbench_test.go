package olricbench

import (
	"context"
	"testing"
	"time"

	"github.com/kvring/kvring/loadtest"
)

func startOlric(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	c, err := StartCluster(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return c
}

func startKvring(t testing.TB, cfg KvringClusterConfig) *KvringCluster {
	t.Helper()
	k, err := StartKvringCluster(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := k.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return k
}

// TestOlricBackendStoresTwoMiBValuesWithLargerTables: with Cluster's table
// size, a 2 MiB value is stored and read back intact, and Lookup stops at the
// first id not held; with Olric's default table size (1 MiB) the same put is
// refused as too large.
func TestOlricBackendStoresTwoMiBValuesWithLargerTables(t *testing.T) {
	ctx := t.Context()
	ids := loadtest.BlockChunkIDs(1, 3)
	chunk := loadtest.Chunk{ID: ids[0], Data: loadtest.ChunkBytes(ids[0], 2<<20), Group: ids[0]}

	c := startOlric(t, ClusterConfig{})
	b, err := NewBackend(BackendConfig{Addrs: c.Addrs(), DMap: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	small := loadtest.Chunk{ID: ids[1], Data: loadtest.ChunkBytes(ids[1], 256<<10), Group: ids[1]}
	out, err := b.Put(ctx, []loadtest.Chunk{chunk, small})
	if err != nil || len(out) != 2 || out[0] != loadtest.Stored || out[1] != loadtest.Stored {
		t.Fatalf("put: %v %v", out, err)
	}
	got, err := b.Get(ctx, ids, ids)
	if err != nil || len(got) != 3 || !got[0].Found || !got[1].Found || got[2].Found {
		t.Fatalf("get: %v", err)
	}
	if !loadtest.VerifyChunk(ids[0], got[0].Data) || !loadtest.VerifyChunk(ids[1], got[1].Data) {
		t.Fatal("read back other bytes")
	}
	if n, err := b.Lookup(ctx, ids, ids); n != 2 || err != nil {
		t.Fatalf("lookup: %d %v, want 2", n, err)
	}

	def := startOlric(t, ClusterConfig{TableSize: 1 << 20}) // Olric's default
	d, err := NewBackend(BackendConfig{Addrs: def.Addrs(), DMap: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out, err = d.Put(ctx, []loadtest.Chunk{chunk})
	if err != nil || len(out) != 1 || out[0] != loadtest.Failed {
		t.Fatalf("2 MiB put with 1 MiB tables: %v %v, want failed (entry too large)", out, err)
	}
}

// TestCompareRunsBothSystems: a tiny comparison completes without errors on
// both systems and reports every phase.
func TestCompareRunsBothSystems(t *testing.T) {
	k, o := startKvring(t, KvringClusterConfig{}), startOlric(t, ClusterConfig{})
	rows, err := Compare(t.Context(), KvringEngines(k.Addrs(), 0), OlricEngines(o.Addrs()),
		CompareConfig{Sizes: []int{64 << 10, 2 << 20}, Ops: 8, Workers: 2, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 8 {
		t.Fatalf("%d rows, want 8", len(rows))
	}
	for _, r := range rows {
		if r.Kvring.Errors != 0 || r.Olric.Errors != 0 || r.Kvring.Ops != 8 || r.Ratio() <= 0 {
			t.Fatalf("round %d %s %d: kvring %+v olric %+v", r.Round, r.Op, r.Size, r.Kvring, r.Olric)
		}
	}
}

// BenchmarkPerCall puts (then gets) b.N values of each size, one per call,
// with 4 workers, on a 3-node kvring and a 3-node Olric cluster, 1 GiB per
// node each (Olric splits its bound evenly over the partitions a node owns:
// at 256 MiB a partition holds about one 2 MiB value and evicts the second). The figures are the put-GB/s, get-GB/s and p50 metrics (ns/op
// also counts making the values and both phases); cmd/olriccompare prints
// the ratios.
func BenchmarkPerCall(b *testing.B) {
	k, o := startKvring(b, KvringClusterConfig{MemoryPerNode: 1 << 30}), startOlric(b, ClusterConfig{MemoryPerNode: 1 << 30})
	block := int64(1)
	for _, size := range []int{256 << 10, 2 << 20} {
		for _, e := range []Engines{KvringEngines(k.Addrs(), 0), OlricEngines(o.Addrs())} {
			b.Run(sizeName(size)+"/"+e.Name, func(b *testing.B) {
				block += int64(b.N/32 + 8)
				put, get, err := RunPerCall(b.Context(), e, "bench-"+sizeName(size), block, size, b.N, 4)
				if err != nil {
					b.Fatal(err)
				}
				if put.Errors+get.Errors > 0 {
					b.Fatalf("%d put and %d get errors: %s%s", put.Errors, get.Errors, put.FirstError, get.FirstError)
				}
				b.SetBytes(int64(size))
				b.ReportMetric(put.GBps(), "put-GB/s")
				b.ReportMetric(get.GBps(), "get-GB/s")
				b.ReportMetric(float64(put.P50.Microseconds()), "put-p50-µs")
				b.ReportMetric(float64(get.P50.Microseconds()), "get-p50-µs")
			})
		}
	}
}

// TestKvringEnginesRouteFromTheFirstCall: an engine KvringEngines makes has
// its ring view before it is handed out, so the timed calls go straight to
// each chunk's owner.
func TestKvringEnginesRouteFromTheFirstCall(t *testing.T) {
	k := startKvring(t, KvringClusterConfig{})
	b, err := KvringEngines(k.Addrs(), 0).New("route-test")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n := len(b.(*loadtest.Kvring).Client().Routing().Members); n != 3 {
		t.Fatalf("the new engine routes by a view of %d members, want 3", n)
	}
}
