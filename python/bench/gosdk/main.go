// Command gosdk measures the Go SDK's put and get throughput against a running cluster, for python/bench/bench.py,
// which runs the Python client on the same cluster and workload in the same run. It prints one JSON object.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kvring/kvring/client"
)

type result struct {
	Op     string  `json:"op"`
	Size   int     `json:"size"`
	Chunks int     `json:"chunks"`
	Batch  int     `json:"batch"`
	Secs   float64 `json:"secs"`
	GBps   float64 `json:"gbps"`
}

func main() {
	seeds := flag.String("seeds", "127.0.0.1:9600", "comma-separated gRPC addresses")
	ns := flag.String("namespace", "bench/go", "namespace")
	size := flag.Int("size", 2<<20, "chunk size in bytes")
	count := flag.Int("chunks", 64, "chunks to put, then get")
	batch := flag.Int("batch", 4, "chunks per call")
	rounds := flag.Int("rounds", 3, "get rounds")
	noRoute := flag.Bool("no-routing", false, "send every call through the connected node")
	flag.Parse()
	if err := run(strings.Split(*seeds, ","), *ns, *size, *count, *batch, *rounds, *noRoute); err != nil {
		fmt.Fprintln(os.Stderr, "gosdk:", err)
		os.Exit(1)
	}
}

func run(seeds []string, ns string, size, count, batch, rounds int, noRoute bool) error {
	c, err := client.New(client.Config{
		Conn:           client.ConnConfig{Seeds: seeds},
		Namespace:      ns,
		Schema:         client.Schema{Model: "bench", Dtype: "bf16", TokensPerChunk: 16},
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		DisableRouting: noRoute,
	})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for c.State().Status != client.ConnConnected {
		if time.Now().After(deadline) {
			return fmt.Errorf("not connected: %+v", c.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Register(ctx); err != nil {
		return err
	}
	if !noRoute {
		// The ring view a long-running engine has.
		if err := c.RefreshRouting(ctx); err != nil {
			return err
		}
	}
	chunks := make([]client.Chunk, count)
	ids := make([]client.ChunkID, count)
	for i := range chunks {
		data := make([]byte, size)
		_, _ = rand.Read(data)
		_, _ = rand.Read(ids[i][:])
		chunks[i] = client.Chunk{ID: ids[i], Data: data}
	}
	var out []result
	start := time.Now()
	for i := 0; i < count; i += batch {
		res, err := c.Put(ctx, chunks[i:min(i+batch, count)])
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Status != client.Stored {
				return fmt.Errorf("put %s: %s %s", r.ID, r.Status, r.Reason)
			}
		}
	}
	secs := time.Since(start).Seconds()
	out = append(out, result{"put", size, count, batch, secs, float64(size*count) / secs / 1e9})
	start = time.Now()
	for range rounds {
		for i := 0; i < count; i += batch {
			res, err := c.Get(ctx, ids[i:min(i+batch, count)])
			if err != nil {
				return err
			}
			for _, r := range res {
				if !r.Found {
					return fmt.Errorf("get %s: %s", r.ID, r.Reason)
				}
			}
		}
	}
	secs = time.Since(start).Seconds()
	out = append(out, result{"get", size, count * rounds, batch, secs, float64(size*count*rounds) / secs / 1e9})
	return json.NewEncoder(os.Stdout).Encode(out)
}
