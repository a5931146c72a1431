package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
)

// BenchmarkClusterTLS: the cost of the trust boundary, side by side in one
// run. Two 3-node clusters: one plaintext, one with TLS for every gRPC
// connection (engines and peers, mutual between nodes), a cluster key,
// bearer tokens and a gossip key. put and get move 2 MiB chunks as
// BenchmarkClusterPut2MiB and BenchmarkClusterGet2MiB do, in turns on both
// clusters, and report the secured cluster's throughput (MB/s) with the
// plaintext one's (plain-MB/s) and their ratio (tls/plain; the target is ≥
// 0.8); lookup reports the latency percentiles of a 256-id lookup on each.
func BenchmarkClusterTLS(b *testing.B) {
	benchPrepare(b)
	pki := newTestPKI(b)
	dir := b.TempDir()
	file := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			b.Fatal(err)
		}
		return path
	}
	secured := append(pki.tlsArgs(), "--cluster-key-file", file("cluster", "an example cluster key, 32 bytes"),
		"--auth-tokens-file", file("tokens", "bench-token-0123456789 bench/\n"),
		"--gossip-key-file", file("gossip", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))))
	plain := startBenchCluster(b, benchMemoryLimit)
	tlsCl := startBenchClusterConn(b, benchMemoryLimit, client.ConnConfig{TLSCAFile: pki.ca, Token: "bench-token-0123456789"}, secured...)

	var seq atomic.Uint64
	putTo := func(cl *benchCluster) func(ctx context.Context, i int) error {
		return func(ctx context.Context, _ int) error {
			ids, data := benchPutBatch("tls-put", &seq)
			chunks := make([]client.Chunk, len(ids))
			for j := range ids {
				chunks[j] = client.Chunk{ID: ids[j], Data: data[j]}
			}
			return cl.put(ctx, chunks)
		}
	}
	b.Run("put", func(b *testing.B) {
		if want := tlsCl.putBytes.Load() + int64(b.N)*benchBatch*benchChunkSize; want > benchMaxPutBytes {
			b.Fatalf("this run would write %d MiB, more than the clusters are sized for: use a smaller -benchtime", want>>20)
		}
		mbps, plainMBps := runBenchInterleaved(b, putTo(tlsCl), putTo(plain), nil)
		b.ReportMetric(plainMBps, "plain-MB/s")
		b.ReportMetric(mbps/plainMBps, "tls/plain")
	})

	ctx := context.Background()
	for _, cl := range []*benchCluster{plain, tlsCl} {
		for k := uint64(0); k < benchPatterns; k += benchBatch {
			chunks := make([]client.Chunk, benchBatch)
			for j := range chunks {
				chunks[j] = client.Chunk{ID: benchID("tls-get", k+uint64(j)), Data: benchPattern(k + uint64(j))}
			}
			if err := cl.put(ctx, chunks); err != nil {
				b.Fatal(err)
			}
		}
	}
	getFrom := func(cl *benchCluster) func(ctx context.Context, i int) error {
		return func(ctx context.Context, i int) error {
			ks := make([]uint64, benchBatch)
			ids := make([]client.ChunkID, benchBatch)
			for j := range ks {
				ks[j] = uint64(i*benchBatch+j) % benchPatterns
				ids[j] = benchID("tls-get", ks[j])
			}
			res, err := cl.c.Get(ctx, ids)
			if err != nil {
				return err
			}
			for j, r := range res {
				if !r.Found || !bytes.Equal(r.Data, benchPattern(ks[j])) {
					return fmt.Errorf("get: chunk %d not read back: %s", ks[j], r.Reason)
				}
			}
			return nil
		}
	}
	b.Run("get", func(b *testing.B) {
		mbps, plainMBps := runBenchInterleaved(b, getFrom(tlsCl), getFrom(plain), nil)
		b.ReportMetric(plainMBps, "plain-MB/s")
		b.ReportMetric(mbps/plainMBps, "tls/plain")
	})

	b.Run("lookup", func(b *testing.B) {
		tokens := make([]uint32, 4096)
		for i := range tokens {
			tokens[i] = uint32(i*7919) % 128256
		}
		ids, err := client.ChunkIDs(tokens, 16)
		if err != nil {
			b.Fatal(err)
		}
		const held = 128
		for _, cl := range []*benchCluster{plain, tlsCl} {
			chunks := make([]client.Chunk, held)
			for i := range chunks {
				chunks[i] = client.Chunk{ID: ids[i], Data: benchPattern(uint64(i))[:64<<10]}
			}
			if err := cl.put(ctx, chunks); err != nil {
				b.Fatal(err)
			}
		}
		lookup := func(cl *benchCluster) (time.Duration, error) {
			start := time.Now()
			res, err := cl.c.Lookup(ctx, ids, 0)
			d := time.Since(start)
			if err == nil && res.Held != held {
				err = fmt.Errorf("lookup: %d of %d ids held, want %d", res.Held, len(ids), held)
			}
			return d, err
		}
		for range 50 {
			for _, cl := range []*benchCluster{plain, tlsCl} {
				if _, err := lookup(cl); err != nil {
					b.Fatal(err)
				}
			}
		}
		lat, plainLat := make([]time.Duration, b.N), make([]time.Duration, b.N)
		b.ResetTimer()
		for i := range lat {
			order := []*benchCluster{tlsCl, plain}
			into := []*time.Duration{&lat[i], &plainLat[i]}
			if i%2 == 1 {
				order[0], order[1], into[0], into[1] = order[1], order[0], into[1], into[0]
			}
			for k, cl := range order {
				d, err := lookup(cl)
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
	})
}
