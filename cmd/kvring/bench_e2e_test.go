package main

// Benchmarks of the cluster's throughput and lookup latency targets, against
// the real binary on loopback:
//
//	go test -run '^$' -bench 'Cluster(Put|Get)' -benchtime 32x -count 3 ./cmd/kvring/
//	go test -run '^$' -bench ClusterLookup -benchtime 3000x -count 3 ./cmd/kvring/
//
// Each benchmark function starts a 3-node cluster once (built without -race,
// whatever the test binary is) and, for put and get, a plain gRPC sink: the
// test binary re-executed (see TestMain) serving the same message shapes with
// no protocol behind them. The plain sub-benchmark measures the baseline
// alone; the kvring one runs cluster and baseline in turns (benchRound batches
// each) and reports both throughputs and their ratio kvring/plain, so that the
// ratio holds up on a shared, noisy host. Figures are reported, never
// asserted (style habit 13); a wrong answer (a chunk not stored or not
// counted by the nodes, a read not byte-exact) fails the benchmark.
// BenchmarkClusterPut2MiB/steady measures puts into a full cluster, where
// chunks are evicted and some rejected, and reports how many.
//
// Run them without -race: the client and the sink are the test binary.
// KVRING_BENCH_BINARY=path benchmarks that kvring binary instead of building
// one.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/launch"
	"github.com/kvring/kvring/internal/testutil"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

const (
	// benchChunkSize is one chunk: 16 tokens of an 8B model's KV in bf16.
	benchChunkSize = 2 << 20
	// benchBatch chunks go in one Put or Get call.
	benchBatch = 8
	// benchClients goroutines issue calls concurrently over one connection.
	benchClients = 4
	// benchPatterns distinct chunk contents exist; the get benchmark reads
	// that many chunks over and over.
	benchPatterns = 64
	// benchMemoryLimit is each node's budget, far above what a run writes.
	benchMemoryLimit = "6GiB"
	// benchSteadyMemoryLimit is each node's budget in the steady-state put
	// benchmark: small, so that filling the cluster is quick.
	benchSteadyMemoryLimit      = "512MiB"
	benchSteadyMemoryLimitBytes = 512 << 20
	// benchMaxPutBytes bounds what one put benchmark writes to the cluster,
	// so that nothing is ever evicted or rejected.
	benchMaxPutBytes = 6 << 30
	// benchSinkEnv, when set, makes the test binary serve the plain sink.
	benchSinkEnv = "KVRING_BENCH_SINK"
)

// BenchmarkClusterPut2MiB: confirmed writes of 2 MiB chunks, benchBatch per
// call from benchClients goroutines, through a 3-node cluster (R=1), against
// the same bytes streamed to a sink that only acknowledges them. The plain
// sub-benchmark is the baseline alone; the kvring one runs the baseline in
// turns with the cluster and reports the ratio of the two throughputs. Both
// write into a cluster that starts empty, so every slot is a never-touched
// shared-memory page; steady does the same against a second cluster filled to
// its memory limit first, where new chunks take evicted chunks' slots (see
// runBenchSteadyPuts).
func BenchmarkClusterPut2MiB(b *testing.B) {
	benchPrepare(b)
	cl := startBenchCluster(b, benchMemoryLimit)
	sink := startBenchSink(b)
	var seq atomic.Uint64 // chunk numbers: every put id is new
	plain := func(ctx context.Context, _ int) error {
		ids, data := benchPutBatch("put", &seq)
		return sink.put(ctx, ids, data)
	}

	b.Run("plain", func(b *testing.B) {
		runBenchBatches(b, plain)
	})
	b.Run("kvring", func(b *testing.B) {
		if want := cl.putBytes.Load() + int64(b.N)*benchBatch*benchChunkSize; want > benchMaxPutBytes {
			b.Fatalf("this run would write %d MiB to the cluster, more than the %d MiB it is sized for: use a smaller -benchtime",
				want>>20, benchMaxPutBytes>>20)
		}
		var last atomic.Pointer[[]client.Chunk]
		mbps, plainMBps := runBenchInterleaved(b, func(ctx context.Context, _ int) error {
			ids, data := benchPutBatch("put", &seq)
			chunks := make([]client.Chunk, len(ids))
			for j := range ids {
				chunks[j] = client.Chunk{ID: ids[j], Data: data[j]}
			}
			if err := cl.put(ctx, chunks); err != nil {
				return err
			}
			last.Store(&chunks)
			return nil
		}, plain, nil)
		b.ReportMetric(plainMBps, "plain-MB/s")
		b.ReportMetric(mbps/plainMBps, "kvring/plain")
		cl.checkNothingLost(b)
		cl.checkReadBack(b, *last.Load())
	})

	// steady: the same puts into a cluster that is full and stays full, as a
	// cache in service is. Its own three nodes (benchSteadyMemoryLimit each),
	// started and filled on first use; they live until the parent ends.
	var (
		steady    *benchCluster
		steadySeq atomic.Uint64
	)
	b.Run("steady", func(sb *testing.B) {
		if steady == nil {
			c := startBenchCluster(benchOwned{TB: sb, owner: b}, benchSteadyMemoryLimit)
			c.fill(sb, &steadySeq)
			steady = c
		}
		runBenchSteadyPuts(sb, steady, &steadySeq, plain)
	})
}

// benchOwned is a testing.TB whose cleanups and temporary directories belong
// to owner, so that what is started through it outlives the TB it wraps.
type benchOwned struct {
	testing.TB
	owner testing.TB
}

func (o benchOwned) Cleanup(f func()) { o.owner.Cleanup(f) }
func (o benchOwned) TempDir() string  { return o.owner.TempDir() }

// fill puts distinct "steady" chunks, benchRound batches at a time, until
// every node's store is within one batch of its limit or has started to
// evict. Rejections are accepted; a failed chunk fails b.
func (cl *benchCluster) fill(b *testing.B, seq *atomic.Uint64) {
	b.Helper()
	for written := int64(0); ; written += benchRound * benchBatch * benchChunkSize {
		full := true
		for _, n := range cl.nodes {
			st, err := n.stats()
			if err != nil {
				b.Fatal(err)
			}
			if st.UsedBytes+benchBatch*benchChunkSize < st.LimitBytes && benchSum(st.Evictions) == 0 {
				full = false
			}
		}
		if full {
			return
		}
		if total := int64(len(cl.nodes)) * benchSteadyMemoryLimitBytes; written > 3*total {
			b.Fatalf("the cluster is not full after %d MiB of puts, three times its %d MiB", written>>20, total>>20)
		}
		err := runBenchConcurrently(0, benchRound, func(ctx context.Context, _ int) error {
			ids, data := benchPutBatch("steady", seq)
			chunks := make([]client.Chunk, len(ids))
			for j := range ids {
				chunks[j] = client.Chunk{ID: ids[j], Data: data[j]}
			}
			res, err := cl.c.Put(ctx, chunks)
			if err != nil {
				return err
			}
			for j, r := range res {
				if r.Status != client.Stored && r.Status != client.Rejected {
					return fmt.Errorf("put while filling: chunk %s: %v %s", chunks[j].ID, r.Status, r.Reason)
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchPutTally counts a steady-state run's put results by status.
type benchPutTally struct {
	stored, storedBytes, alreadyHeld, rejected, failed atomic.Int64
	// rejectedAtSeal counts rejections decided after the chunk's bytes had
	// been sent (the owner refused it at the seal, not at the stage), told
	// apart by the store's error text in the reason ("cannot seal").
	rejectedAtSeal atomic.Int64
	firstFailure   atomic.Pointer[string]
}

// runBenchSteadyPuts measures puts of new distinct chunks into cl, full
// already, in turns with the plain baseline, as the kvring sub-benchmark
// does. Every result is counted by status: rejected and failed chunks are
// reported (rejected-%, failed-%), never an error, and only the bytes of
// stored chunks count as throughput (stored-MB/s; kvring/plain is its ratio
// to the baseline's MB/s). The first chunk reported stored of every batch is
// read back after the turn it was put in, untimed; it must come back byte for
// byte unless it was evicted meanwhile (readback-miss-%, of those sampled;
// more than half missing fails). The nodes' counters must agree with the
// results, and at the end no node may hold more than its limit (used/limit,
// resident/limit: the largest over the nodes).
func runBenchSteadyPuts(b *testing.B, cl *benchCluster, seq *atomic.Uint64, plain func(ctx context.Context, i int) error) {
	before := cl.allStats(b)
	var (
		tally    benchPutTally
		sampleMu sync.Mutex
		sample   []client.Chunk // stored, not yet read back
		sampled  int
		missed   int
	)
	measured := func(ctx context.Context, _ int) error {
		ids, data := benchPutBatch("steady", seq)
		chunks := make([]client.Chunk, len(ids))
		for j := range ids {
			chunks[j] = client.Chunk{ID: ids[j], Data: data[j]}
		}
		res, err := cl.c.Put(ctx, chunks)
		if err != nil {
			return err
		}
		picked := false
		for j, r := range res {
			switch r.Status {
			case client.Stored:
				if len(r.Holders) == 0 {
					return fmt.Errorf("put: chunk %s reported stored by no holder", chunks[j].ID)
				}
				tally.stored.Add(1)
				tally.storedBytes.Add(int64(len(chunks[j].Data)))
				if !picked {
					picked = true
					sampleMu.Lock()
					sample = append(sample, chunks[j])
					sampleMu.Unlock()
				}
			case client.AlreadyHeld: // only a resend after a fallback can meet a new id held
				tally.alreadyHeld.Add(1)
			case client.Rejected:
				tally.rejected.Add(1)
				if strings.Contains(r.Reason, "cannot seal") {
					tally.rejectedAtSeal.Add(1)
				}
			default:
				tally.failed.Add(1)
				reason := fmt.Sprintf("chunk %s: %v: %s", chunks[j].ID, r.Status, r.Reason)
				tally.firstFailure.CompareAndSwap(nil, &reason)
			}
		}
		return nil
	}
	readBack := func() error {
		sampleMu.Lock()
		chunks := sample
		sample = nil
		sampleMu.Unlock()
		for len(chunks) > 0 {
			part := chunks[:min(benchBatch, len(chunks))]
			chunks = chunks[len(part):]
			ids := make([]client.ChunkID, len(part))
			for i := range part {
				ids[i] = part[i].ID
			}
			res, err := cl.c.Get(context.Background(), ids)
			if err != nil {
				return err
			}
			for i, r := range res {
				sampled++
				switch {
				case !r.Found:
					missed++ // evicted since its put: the cache is full
				case !bytes.Equal(r.Data, part[i].Data):
					return fmt.Errorf("chunk %s, reported stored, came back with other bytes", ids[i])
				}
			}
		}
		return nil
	}
	_, plainMBps := runBenchInterleaved(b, measured, plain, readBack)
	b.SetBytes(0) // MB/s would count the bytes offered, rejected ones included: stored-MB/s replaces it

	total := float64(b.N * benchBatch)
	storedMBps := float64(tally.storedBytes.Load()) / 1e6 / b.Elapsed().Seconds()
	b.ReportMetric(storedMBps, "stored-MB/s")
	b.ReportMetric(plainMBps, "plain-MB/s")
	b.ReportMetric(storedMBps/plainMBps, "kvring/plain")
	b.ReportMetric(100*float64(tally.rejected.Load())/total, "rejected-%")
	b.ReportMetric(100*float64(tally.rejectedAtSeal.Load())/total, "rejected-at-seal-%")
	b.ReportMetric(100*float64(tally.failed.Load())/total, "failed-%")
	if f := tally.firstFailure.Load(); f != nil {
		b.Logf("%d chunks failed; the first: %s", tally.failed.Load(), *f)
	}
	if sampled > 0 {
		b.ReportMetric(100*float64(missed)/float64(sampled), "readback-miss-%")
	}
	if 2*missed > sampled {
		b.Errorf("%d of the %d chunks sampled, reported stored, did not read back right after their turn", missed, sampled)
	}

	// The nodes' own counts. R=1: each stored chunk was sealed by one node;
	// already_held only follows a resend of a chunk sealed by the first try;
	// a failed chunk may have been sealed all the same.
	after := cl.allStats(b)
	var seals, rejections, evictions uint64
	var usedMax, residentMax float64
	for i, n := range cl.nodes {
		a, bf := after[i], before[i]
		seals += a.Seals - bf.Seals
		rejections += benchSum(a.Rejections) - benchSum(bf.Rejections)
		evictions += benchSum(a.Evictions) - benchSum(bf.Evictions)
		if a.UsedBytes > a.LimitBytes || a.ResidentBytes > a.LimitBytes {
			b.Errorf("node %s holds more than its limit of %d MiB: used %d MiB, resident %d MiB",
				n.id, a.LimitBytes>>20, a.UsedBytes>>20, a.ResidentBytes>>20)
		}
		if a.StagedChunks != 0 {
			b.Errorf("node %s still has %d staged chunks", n.id, a.StagedChunks)
		}
		usedMax = max(usedMax, float64(a.UsedBytes)/float64(a.LimitBytes))
		residentMax = max(residentMax, float64(a.ResidentBytes)/float64(a.LimitBytes))
	}
	held := uint64(tally.stored.Load() + tally.alreadyHeld.Load())
	if seals < held || seals > held+uint64(tally.failed.Load()) {
		b.Errorf("the nodes sealed %d chunks; the results say %d stored, %d already held, %d failed",
			seals, tally.stored.Load(), tally.alreadyHeld.Load(), tally.failed.Load())
	}
	if rejections < uint64(tally.rejected.Load()) {
		b.Errorf("the nodes rejected %d chunks; the results say %d", rejections, tally.rejected.Load())
	}
	b.ReportMetric(100*float64(evictions)/total, "evicted-%")
	b.ReportMetric(usedMax, "used/limit")
	b.ReportMetric(residentMax, "resident/limit")
}

// allStats returns every node's /v1/stats, in cl.nodes's order.
func (cl *benchCluster) allStats(b *testing.B) []benchStats {
	b.Helper()
	out := make([]benchStats, len(cl.nodes))
	for i, n := range cl.nodes {
		st, err := n.stats()
		if err != nil {
			b.Fatal(err)
		}
		out[i] = st
	}
	return out
}

// BenchmarkClusterGet2MiB: reads of 2 MiB chunks, benchBatch per call from
// benchClients goroutines, through a 3-node cluster (R=1: a third of the
// chunks is local to the node the client talks to), against a sink that
// streams the same bytes back; sub-benchmarks as in BenchmarkClusterPut2MiB.
// Every chunk is checked byte for byte on both paths.
func BenchmarkClusterGet2MiB(b *testing.B) {
	benchPrepare(b)
	cl := startBenchCluster(b, benchMemoryLimit)
	sink := startBenchSink(b)
	ctx := context.Background()
	for k := uint64(0); k < benchPatterns; k += benchBatch {
		chunks := make([]client.Chunk, benchBatch)
		for j := range chunks {
			chunks[j] = client.Chunk{ID: benchID("get", k+uint64(j)), Data: benchPattern(k + uint64(j))}
		}
		if err := cl.put(ctx, chunks); err != nil {
			b.Fatal(err)
		}
	}
	batchKeys := func(i int) []uint64 {
		ks := make([]uint64, benchBatch)
		for j := range ks {
			ks[j] = uint64(i*benchBatch+j) % benchPatterns
		}
		return ks
	}
	plain := func(ctx context.Context, i int) error {
		return sink.get(ctx, batchKeys(i))
	}

	b.Run("plain", func(b *testing.B) {
		runBenchBatches(b, plain)
	})
	b.Run("kvring", func(b *testing.B) {
		mbps, plainMBps := runBenchInterleaved(b, func(ctx context.Context, i int) error {
			ks := batchKeys(i)
			ids := make([]client.ChunkID, len(ks))
			for j, k := range ks {
				ids[j] = benchID("get", k)
			}
			res, err := cl.c.Get(ctx, ids)
			if err != nil {
				return err
			}
			for j, r := range res {
				if !r.Found {
					return fmt.Errorf("get: chunk %d not found: %s", ks[j], r.Reason)
				}
				if !bytes.Equal(r.Data, benchPattern(ks[j])) {
					return fmt.Errorf("get: chunk %d came back with other bytes", ks[j])
				}
			}
			return nil
		}, plain, nil)
		b.ReportMetric(plainMBps, "plain-MB/s")
		b.ReportMetric(mbps/plainMBps, "kvring/plain")
		cl.checkNothingLost(b)
	})
}

// BenchmarkClusterLookup256: one Lookup of a 4k-token prompt (256 ids at 16
// tokens per chunk) whose leading 128 chunks are held, on a 3-node cluster,
// one call at a time; reports the latency percentiles of the calls (p50-us,
// p99-us). Each op also makes the same call to the plain sink, which answers
// at once (plain-p50-us, plain-p99-us): the floor of one gRPC round trip on
// this host, measured in turns with the cluster. ns/op covers both calls.
func BenchmarkClusterLookup256(b *testing.B) {
	benchPrepare(b)
	// unsettled: right after the cluster starts, within the settle window
	// (default 2 minutes), when every lookup asks every member. settled:
	// each owner answers for its own ids, as once the window has passed.
	// Nodes with no window (--settle-window negative: never unsettled) take
	// that path from the start, so nothing waits for a window to pass; each
	// node's /v1/ring confirms it before anything is measured.
	b.Run("unsettled", func(b *testing.B) { benchLookup256(b, startBenchCluster(b, benchMemoryLimit)) })
	b.Run("settled", func(b *testing.B) {
		cl := startBenchCluster(b, benchMemoryLimit, "--settle-window", "-1s")
		for _, n := range cl.nodes {
			if unsettled, err := n.unsettled(); err != nil || unsettled {
				b.Fatalf("node %s: unsettled %v (%v), want settled", n.id, unsettled, err)
			}
		}
		benchLookup256(b, cl)
	})
}

// benchLookup256 measures lookups of 256 ids, 128 of them held, through cl,
// in turns with a plain gRPC call of the same request to a sink that answers
// at once.
func benchLookup256(b *testing.B, cl *benchCluster) {
	sink := startBenchSink(b)
	ctx := context.Background()
	tokens := make([]uint32, 4096)
	for i := range tokens {
		tokens[i] = uint32(i*7919) % 128256
	}
	ids, err := client.ChunkIDs(tokens, 16)
	if err != nil {
		b.Fatal(err)
	}
	const held = 128
	chunks := make([]client.Chunk, held)
	for i := range chunks {
		// The size does not enter a lookup; small chunks keep the set-up short.
		chunks[i] = client.Chunk{ID: ids[i], Data: benchPattern(uint64(i))[:64<<10]}
	}
	if err := cl.put(ctx, chunks); err != nil {
		b.Fatal(err)
	}
	lookup := func() (time.Duration, error) {
		start := time.Now()
		res, err := cl.c.Lookup(ctx, ids, 0)
		d := time.Since(start)
		if err != nil {
			return d, err
		}
		if res.Held != held {
			return d, fmt.Errorf("lookup: %d of %d ids held, want %d", res.Held, len(ids), held)
		}
		return d, nil
	}
	plain := func() (time.Duration, error) {
		start := time.Now()
		raw := make([][]byte, len(ids))
		for i := range ids {
			raw[i] = ids[i][:]
		}
		res, err := sink.cache.Lookup(ctx, &kvringv1.LookupRequest{
			Namespace: &kvringv1.NamespaceRef{Name: "bench/llama", Fingerprint: make([]byte, 32)}, Ids: raw})
		d := time.Since(start)
		if err != nil {
			return d, err
		}
		if res.GetHeld() != held {
			return d, fmt.Errorf("plain lookup: %d of %d ids held, want %d", res.GetHeld(), len(ids), held)
		}
		return d, nil
	}
	for range 50 { // connections between nodes, pools, caches
		if _, err := lookup(); err != nil {
			b.Fatal(err)
		}
		if _, err := plain(); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, b.N)
	plainLat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range lat {
		calls := []func() (time.Duration, error){lookup, plain}
		into := []*time.Duration{&lat[i], &plainLat[i]}
		if i%2 == 1 {
			calls[0], calls[1], into[0], into[1] = calls[1], calls[0], into[1], into[0]
		}
		for k, call := range calls {
			d, err := call()
			if err != nil {
				b.Fatal(err)
			}
			*into[k] = d
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	slices.Sort(plainLat)
	b.ReportMetric(benchPercentile(lat, 50), "p50-us")
	b.ReportMetric(benchPercentile(lat, 99), "p99-us")
	b.ReportMetric(benchPercentile(plainLat, 50), "plain-p50-us")
	b.ReportMetric(benchPercentile(plainLat, 99), "plain-p99-us")
}

// benchPercentile is the nearest-rank percentile of sorted, in microseconds.
func benchPercentile(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := max((len(sorted)*p+99)/100-1, 0)
	return float64(sorted[i].Nanoseconds()) / 1e3
}

// benchRound is how many batches run between switches from kvring to the
// baseline and back, when both are measured in turns.
const benchRound = 16

// runBenchBatches runs batch b.N times, spread over benchClients goroutines,
// and returns the throughput in MB/s (10^6 bytes, as go test reports it). An
// error fails the benchmark.
func runBenchBatches(b *testing.B, batch func(ctx context.Context, i int) error) float64 {
	b.SetBytes(benchBatch * benchChunkSize)
	b.ResetTimer()
	err := runBenchConcurrently(0, b.N, batch)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	return benchMBps(b.N, b.Elapsed())
}

// runBenchInterleaved runs measured b.N times and baseline as many times, in
// turns of benchRound batches (which goes first alternates), so that both
// see the same machine: on a shared host the load changes from one second to
// the next. Only measured is timed by b; it returns both throughputs in MB/s.
// afterMeasured, if not nil, runs after each turn of measured, untimed; an
// error from it fails the benchmark.
func runBenchInterleaved(b *testing.B, measured, baseline func(ctx context.Context, i int) error, afterMeasured func() error) (mbps, baseMBps float64) {
	b.SetBytes(benchBatch * benchChunkSize)
	var baseTime time.Duration
	runBase := func(first, n int) {
		b.StopTimer()
		start := time.Now()
		err := runBenchConcurrently(first, n, baseline)
		baseTime += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ResetTimer()
	for round, done := 0, 0; done < b.N; round, done = round+1, done+benchRound {
		n := min(benchRound, b.N-done)
		if round%2 == 1 {
			runBase(done, n)
		}
		if err := runBenchConcurrently(done, n, measured); err != nil {
			b.Fatal(err)
		}
		if afterMeasured != nil {
			b.StopTimer()
			err := afterMeasured()
			b.StartTimer()
			if err != nil {
				b.Fatal(err)
			}
		}
		if round%2 == 0 {
			runBase(done, n)
		}
	}
	b.StopTimer()
	return benchMBps(b.N, b.Elapsed()), benchMBps(b.N, baseTime)
}

func benchMBps(batches int, d time.Duration) float64 {
	return float64(batches) * benchBatch * benchChunkSize / 1e6 / d.Seconds()
}

// runBenchConcurrently calls batch for first, first+1, ... first+n-1 from
// benchClients goroutines and returns the first error, after which it starts
// no more batches.
func runBenchConcurrently(first, n int, batch func(ctx context.Context, i int) error) error {
	ctx := context.Background()
	var (
		next     atomic.Int64
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	for range benchClients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := batch(ctx, first+int(i)); err != nil {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// benchID names chunk n of a benchmark's set.
func benchID(set string, n uint64) client.ChunkID {
	return sha256.Sum256(binary.LittleEndian.AppendUint64([]byte(set), n))
}

// benchPutBatch returns benchBatch ids of set never used before (seq counts
// the set's chunks) and their bytes.
func benchPutBatch(set string, seq *atomic.Uint64) ([]client.ChunkID, [][]byte) {
	base := seq.Add(benchBatch) - benchBatch
	ids := make([]client.ChunkID, benchBatch)
	data := make([][]byte, benchBatch)
	for j := range ids {
		ids[j] = benchID(set, base+uint64(j))
		data[j] = benchPattern(base + uint64(j))
	}
	return ids, data
}

var benchPatternCache [benchPatterns]struct {
	once sync.Once
	data []byte
}

// benchPattern returns the bytes of chunk n: one of benchPatterns random
// (incompressible) 2 MiB patterns, the same in every process. Shared: the
// caller must not modify it.
func benchPattern(n uint64) []byte {
	k := n % benchPatterns
	p := &benchPatternCache[k]
	p.once.Do(func() {
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], k)
		p.data = make([]byte, benchChunkSize)
		rand.NewChaCha8(seed).Read(p.data)
	})
	return p.data
}

// benchPrepare computes the chunk patterns before anything is timed and warns
// when the figures cannot mean anything.
func benchPrepare(b *testing.B) {
	b.Helper()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				b.Log("the test binary is built with -race: the client and the plain sink are instrumented, the nodes are not; the figures mean nothing")
			}
		}
	}
	for k := range uint64(benchPatterns) {
		benchPattern(k)
	}
}

// benchBinaryEnv names a kvring binary to benchmark instead of building
// one, e.g. to compare two builds.
const benchBinaryEnv = "KVRING_BENCH_BINARY"

// benchBinary compiles cmd/kvring without -race, once per test binary run,
// unless benchBinaryEnv names a binary.
var benchBinary = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv(benchBinaryEnv); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "kvring-bench-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kvring")
	if out, err := testutil.CombinedOutput(exec.Command("go", "build", "-o", bin, ".")); err != nil {
		return "", fmt.Errorf("%w: %s", err, out)
	}
	return bin, nil
})

// benchNode is a running `kvring serve` (launch.Node) and the addresses
// it logged.
type benchNode struct {
	*launch.Node
	id, grpc, admin, gossip string
}

// startBenchNode starts a node with the given memory limit on kernel-picked
// loopback ports, segments in /dev/shm, and waits until it is ready. It is
// killed when b ends.
func startBenchNode(b testing.TB, memoryLimit string, extra ...string) *benchNode {
	b.Helper()
	bin, err := benchBinary()
	if err != nil {
		b.Fatalf("cannot build kvring: %v", err)
	}
	ln, err := launch.StartNode(context.Background(), launch.NodeConfig{Binary: bin, Dir: b.TempDir(),
		ShmDir: testutil.ShmDir(b, "bench-"), MemoryLimit: memoryLimit, Args: extra, Logf: b.Logf})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ln.Close)
	return &benchNode{Node: ln, id: ln.ID, grpc: ln.GRPC, admin: ln.Admin, gossip: ln.Gossip}
}

// ringHas reports whether the node's latest ring has every member in ids.
func (n *benchNode) ringHas(ids ...string) bool {
	lines := strings.Split(n.Logs(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], `msg="ring rebuilt"`) {
			for _, id := range ids {
				if !strings.Contains(lines[i], id) {
					return false
				}
			}
			return true
		}
	}
	return false
}

// unsettled reports whether the node says on /v1/ring that its reads also
// ask members that do not own a chunk (within its settle window).
func (n *benchNode) unsettled() (bool, error) {
	var info struct {
		Unsettled *bool `json:"unsettled"`
	}
	resp, err := http.Get("http://" + n.admin + "/v1/ring")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET /v1/ring on %s: %s", n.id, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return false, err
	}
	if info.Unsettled == nil {
		return false, fmt.Errorf("GET /v1/ring on %s: no unsettled field", n.id)
	}
	return *info.Unsettled, nil
}

// benchStats is the part of a node's /v1/stats the benchmarks check.
type benchStats struct {
	LimitBytes        int64             `json:"limit_bytes"`
	UsedBytes         int64             `json:"used_bytes"`
	RetainedFreeBytes int64             `json:"retained_free_bytes"`
	ResidentBytes     int64             `json:"resident_bytes"`
	Chunks            int64             `json:"chunks"`
	StagedChunks      int64             `json:"staged_chunks"`
	Seals             uint64            `json:"seals"`
	Evictions         map[string]uint64 `json:"evictions"`
	Rejections        map[string]uint64 `json:"rejections"`
}

// benchSum is the sum of a by-reason counter.
func benchSum(byReason map[string]uint64) uint64 {
	var n uint64
	for _, v := range byReason {
		n += v
	}
	return n
}

func (n *benchNode) stats() (benchStats, error) {
	var st benchStats
	resp, err := http.Get("http://" + n.admin + "/v1/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /v1/stats on %s: %s", n.id, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// benchCluster is three nodes joined into one ring and a client of them.
type benchCluster struct {
	nodes    []*benchNode
	c        *client.Client
	putCount atomic.Int64 // chunks reported held since the cluster started
	putBytes atomic.Int64
}

// startBenchCluster starts three nodes with memoryLimit each, and extra
// serve flags, and a client connected to them.
func startBenchCluster(b testing.TB, memoryLimit string, extra ...string) *benchCluster {
	b.Helper()
	return startBenchClusterConn(b, memoryLimit, client.ConnConfig{}, extra...)
}

// startBenchClusterConn is startBenchCluster with the client's connection
// settings (TLS, token) taken from conn; its Seeds are the cluster's.
func startBenchClusterConn(b testing.TB, memoryLimit string, conn client.ConnConfig, extra ...string) *benchCluster {
	b.Helper()
	n1 := startBenchNode(b, memoryLimit, extra...)
	n2 := startBenchNode(b, memoryLimit, append([]string{"--join", n1.gossip}, extra...)...)
	n3 := startBenchNode(b, memoryLimit, append([]string{"--join", n1.gossip}, extra...)...)
	cl := &benchCluster{nodes: []*benchNode{n1, n2, n3}}
	testutil.Eventually(b, "every node to see the three members", 30*time.Second, func() bool {
		for _, n := range cl.nodes {
			if !n.ringHas(n1.id, n2.id, n3.id) {
				return false
			}
		}
		return true
	})
	conn.Seeds = []string{n1.grpc, n2.grpc, n3.grpc}
	c, err := client.New(client.Config{
		Conn:        conn,
		Namespace:   "bench/llama",
		Schema:      client.Schema{Model: "llama-8b", Dtype: "bf16", TokensPerChunk: 16, Layout: "nhd"},
		CallTimeout: 2 * time.Minute,
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	cl.c = c
	testutil.Eventually(b, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })

	// Warm up: every node takes writes and serves reads as owner, so the
	// connections between nodes exist before anything is measured.
	warm := make([]client.Chunk, 32)
	ids := make([]client.ChunkID, len(warm))
	for i := range warm {
		ids[i] = benchID("warm", uint64(i))
		warm[i] = client.Chunk{ID: ids[i], Data: benchPattern(uint64(i))[:64<<10]}
	}
	ctx := context.Background()
	if err := cl.put(ctx, warm); err != nil {
		b.Fatal(err)
	}
	cl.checkReadBack(b, warm)
	return cl
}

// put writes chunks and fails unless every one is reported held.
func (cl *benchCluster) put(ctx context.Context, chunks []client.Chunk) error {
	res, err := cl.c.Put(ctx, chunks)
	if err != nil {
		return err
	}
	for j, r := range res {
		if !r.Status.Held() || len(r.Holders) == 0 {
			return fmt.Errorf("put: chunk %s: %v (holders %v) %s", chunks[j].ID, r.Status, r.Holders, r.Reason)
		}
		cl.putCount.Add(1)
		cl.putBytes.Add(int64(len(chunks[j].Data)))
	}
	return nil
}

// checkReadBack fails b unless every chunk reads back byte for byte.
func (cl *benchCluster) checkReadBack(b testing.TB, chunks []client.Chunk) {
	b.Helper()
	ids := make([]client.ChunkID, len(chunks))
	for i := range chunks {
		ids[i] = chunks[i].ID
	}
	res, err := cl.c.Get(context.Background(), ids)
	if err != nil {
		b.Fatal(err)
	}
	for i, r := range res {
		if !r.Found || !bytes.Equal(r.Data, chunks[i].Data) {
			b.Fatalf("chunk %s did not read back (found %v): %s", ids[i], r.Found, r.Reason)
		}
	}
}

// checkNothingLost fails b unless the nodes together hold every chunk put
// since the cluster started and none was evicted, rejected or left staged.
func (cl *benchCluster) checkNothingLost(b *testing.B) {
	b.Helper()
	var chunks int64
	for _, n := range cl.nodes {
		st, err := n.stats()
		if err != nil {
			b.Fatal(err)
		}
		for reason, v := range st.Evictions {
			if v != 0 {
				b.Errorf("node %s evicted %d chunks (%s)", n.id, v, reason)
			}
		}
		for reason, v := range st.Rejections {
			if v != 0 {
				b.Errorf("node %s rejected %d chunks (%s)", n.id, v, reason)
			}
		}
		if st.StagedChunks != 0 {
			b.Errorf("node %s still has %d staged chunks", n.id, st.StagedChunks)
		}
		chunks += st.Chunks
	}
	if want := cl.putCount.Load(); chunks != want {
		b.Errorf("the nodes hold %d chunks, want the %d put", chunks, want)
	}
	if b.Failed() {
		b.FailNow()
	}
}

// benchSink is a client of the plain sink process.
type benchSink struct {
	cache kvringv1.CacheClient
}

// startBenchSink re-executes the test binary as the plain sink and connects
// to it. The sink exits when its stdin closes, at the end of b at the latest.
func startBenchSink(b *testing.B) *benchSink {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), benchSinkEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := testutil.Start(cmd); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	b.Cleanup(func() {
		stdin.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	go func() {
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		close(done)
	}()
	if err != nil {
		b.Fatalf("the sink did not tell its address: %v", err)
	}
	cc, err := grpc.NewClient(strings.TrimSpace(addr), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	return &benchSink{cache: kvringv1.NewCacheClient(cc)}
}

// put streams the chunks' bytes in 1 MiB frames after their descriptors,
// without waiting for an answer in between, and waits for the sink's
// acknowledgement, which says whether each chunk arrived whole.
func (s *benchSink) put(ctx context.Context, ids []client.ChunkID, data [][]byte) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := s.cache.Put(sctx)
	if err != nil {
		return err
	}
	refs := make([]*kvringv1.ChunkRef, len(ids))
	for i := range ids {
		refs[i] = &kvringv1.ChunkRef{Id: ids[i][:], Size: uint64(len(data[i]))}
	}
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{Chunks: refs}}}); err != nil {
		return err
	}
	for i, d := range data {
		err := transfer.SplitFrames(uint32(i), d, transfer.MaxFrameBytes, func(f *kvringv1.DataFrame) error {
			return stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: f}})
		})
		if err != nil {
			return err
		}
	}
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}}); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	res := m.GetResult().GetResults()
	if len(res) != len(ids) {
		return fmt.Errorf("plain put: %d results for %d chunks", len(res), len(ids))
	}
	for i, r := range res {
		if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED {
			return fmt.Errorf("plain put: chunk %d: %s", i, r.GetReason())
		}
	}
	return nil
}

// get reads the chunks with the given pattern numbers back from the sink,
// reassembling each from its frames, and checks them byte for byte.
func (s *benchSink) get(ctx context.Context, ks []uint64) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ids := make([][]byte, len(ks))
	for i, k := range ks {
		ids[i] = binary.LittleEndian.AppendUint64(make([]byte, 0, client.ChunkIDSize), k)[:client.ChunkIDSize]
	}
	stream, err := s.cache.Get(sctx, &kvringv1.GetRequest{Ids: ids})
	if err != nil {
		return err
	}
	out := make([][]byte, len(ks))
	cur := -1
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if h := m.GetHeader(); h != nil {
			cur = int(h.GetIndex())
			if cur >= len(out) {
				return fmt.Errorf("plain get: header for chunk %d of %d", cur, len(out))
			}
			out[cur] = make([]byte, 0, h.GetChunk().GetSize())
			continue
		}
		d := m.GetData()
		if cur < 0 || d.GetIndex() != uint32(cur) || d.GetOffset() != uint64(len(out[cur])) {
			return errors.New("plain get: malformed frame")
		}
		out[cur] = append(out[cur], d.GetData()...)
	}
	for i, k := range ks {
		if !bytes.Equal(out[i], benchPattern(k)) {
			return fmt.Errorf("plain get: chunk %d came back with other bytes", k)
		}
	}
	return nil
}

// benchSinkMain serves the plain sink on a loopback port, prints the address
// on stdout and serves until stdin closes. Called by TestMain.
func benchSinkMain() int {
	for k := range uint64(benchPatterns) {
		benchPattern(k)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench sink:", err)
		return 1
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(4 << 20)) // as the node's server
	kvringv1.RegisterCacheServer(srv, benchSinkServer{})
	fmt.Println(lis.Addr())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		srv.Stop()
	}()
	if err := srv.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, "bench sink:", err)
		return 1
	}
	return 0
}

// benchSinkServer implements Put, Get and Lookup of the Cache service with
// none of kvring behind them: Put counts the bytes of each chunk and
// acknowledges at the end; Get streams pattern k back for an id starting with
// k; Lookup answers that the first half of the ids is held.
type benchSinkServer struct {
	kvringv1.UnimplementedCacheServer
}

func (benchSinkServer) Put(stream kvringv1.Cache_PutServer) error {
	var refs []*kvringv1.ChunkRef
	var got []uint64
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if bg := m.GetBegin(); bg != nil {
			refs = bg.GetChunks()
			got = make([]uint64, len(refs))
		} else if d := m.GetData(); d != nil {
			if int(d.GetIndex()) >= len(got) || d.GetOffset() != got[d.GetIndex()] {
				return errors.New("bench sink: frame out of order")
			}
			got[d.GetIndex()] += uint64(len(d.GetData()))
		} else {
			break // end
		}
	}
	res := make([]*kvringv1.PutChunkResult, len(refs))
	for i, r := range refs {
		res[i] = &kvringv1.PutChunkResult{Index: uint32(i), Status: kvringv1.PutStatus_PUT_STATUS_STORED}
		if got[i] != r.GetSize() {
			res[i].Status, res[i].Reason = kvringv1.PutStatus_PUT_STATUS_FAILED, fmt.Sprintf("got %d of %d bytes", got[i], r.GetSize())
		}
	}
	return stream.Send(&kvringv1.PutResponse{Msg: &kvringv1.PutResponse_Result{Result: &kvringv1.PutResult{Results: res}}})
}

func (benchSinkServer) Lookup(_ context.Context, req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	for _, id := range req.GetIds() {
		if len(id) != client.ChunkIDSize {
			return nil, errors.New("bench sink: bad id")
		}
	}
	return &kvringv1.LookupResponse{Held: uint32(len(req.GetIds()) / 2)}, nil
}

func (benchSinkServer) Get(req *kvringv1.GetRequest, stream kvringv1.Cache_GetServer) error {
	for i, id := range req.GetIds() {
		if len(id) < 8 {
			return errors.New("bench sink: short id")
		}
		data := benchPattern(binary.LittleEndian.Uint64(id))
		err := stream.Send(&kvringv1.GetResponse{Msg: &kvringv1.GetResponse_Header{Header: &kvringv1.ChunkHeader{
			Index: uint32(i), Status: kvringv1.ReadStatus_READ_STATUS_FOUND, Chunk: &kvringv1.ChunkRef{Id: id, Size: uint64(len(data))}}}})
		if err != nil {
			return err
		}
		err = transfer.SplitFrames(uint32(i), data, transfer.MaxFrameBytes, func(f *kvringv1.DataFrame) error {
			return stream.Send(&kvringv1.GetResponse{Msg: &kvringv1.GetResponse_Data{Data: f}})
		})
		if err != nil {
			return err
		}
	}
	return nil
}
