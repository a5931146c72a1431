// Command percall measures what one call costs, phase by phase, on the
// systems of olriccompare: it starts a three-node kvring cluster (and, with
// -olric, an embedded three-node Olric cluster) in this process, then per
// round puts -ops values of -size bytes one per call with -workers engines
// and gets each back (-getloops times), and prints for every phase the calls
// per second, the p50 latency, and the process's CPU time and minor page
// faults per call (getrusage: both clusters and the engines share the
// process, so run one system at a time to read its CPU). Engines are made as
// olriccompare makes them (olricbench.KvringEngines, OlricEngines). For A/B
// runs of two builds, alternate the binaries.
//
//	cd loadtest/olricbench && go run ./cmd/percall [-size 262144] [-ops 256] [-rounds 2] [-olric] [-getloops 1] [-cpuprofile get.prof]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kvring/kvring/loadtest"
	"github.com/kvring/kvring/loadtest/olricbench"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.ops, "ops", 256, "puts (and gets) per round and system")
	flag.IntVar(&cfg.rounds, "rounds", 2, "rounds, each on fresh ids and fresh engines")
	flag.IntVar(&cfg.size, "size", 256<<10, "value size in bytes")
	flag.IntVar(&cfg.workers, "workers", 4, "engines calling in parallel, each with its own client")
	flag.IntVar(&cfg.getLoops, "getloops", 1, "times each round reads its values back (0: puts only)")
	flag.StringVar(&cfg.profile, "cpuprofile", "", "write a CPU profile of each round's get phases to this file plus .system.round")
	olric := flag.Bool("olric", false, "measure an Olric cluster too, after kvring in each round")
	noKvring := flag.Bool("no-kvring", false, "leave kvring out")
	flag.Parse()
	if err := run(context.Background(), cfg, !*noKvring, *olric); err != nil {
		fmt.Fprintln(os.Stderr, "percall:", err)
		os.Exit(1)
	}
}

type config struct {
	ops, rounds, size, workers, getLoops int
	profile                              string
}

func run(ctx context.Context, cfg config, withKvring, withOlric bool) error {
	var systems []olricbench.Engines
	if withKvring {
		kv, err := olricbench.StartKvringCluster(ctx, olricbench.KvringClusterConfig{MemoryPerNode: 1 << 30})
		if err != nil {
			return err
		}
		defer kv.Close(context.WithoutCancel(ctx))
		systems = append(systems, olricbench.KvringEngines(kv.Addrs(), 0))
	}
	if withOlric {
		o, err := olricbench.StartCluster(ctx, olricbench.ClusterConfig{MemoryPerNode: 1 << 30})
		if err != nil {
			return err
		}
		defer o.Close(context.WithoutCancel(ctx))
		systems = append(systems, olricbench.OlricEngines(o.Addrs()))
	}
	block := int64(1_000_000)
	for r := range cfg.rounds {
		for _, e := range systems {
			if err := round(ctx, cfg, e, r, block); err != nil {
				return err
			}
		}
		block += int64(cfg.ops/32 + 8 + cfg.workers)
	}
	return nil
}

// round puts and gets one round's values on e and prints the phases.
func round(ctx context.Context, cfg config, e olricbench.Engines, r int, block int64) error {
	ids := make([]loadtest.ChunkID, 0, cfg.ops)
	for b := block; len(ids) < cfg.ops; b++ {
		ids = append(ids, loadtest.BlockChunkIDs(b, 32)...)
	}
	ids = ids[:cfg.ops]
	data := make([][]byte, cfg.ops)
	for i, id := range ids {
		data[i] = loadtest.ChunkBytes(id, cfg.size)
	}
	engines := make([]loadtest.Backend, cfg.workers)
	defer func() {
		for _, b := range engines {
			if b != nil {
				b.Close()
			}
		}
	}()
	ns := fmt.Sprintf("percall-r%d", r)
	for w := range engines {
		var err error
		if engines[w], err = e.New(ns); err != nil {
			return err
		}
	}
	put := phase(engines, cfg.ops, func(b loadtest.Backend, i int) error {
		out, err := b.Put(ctx, []loadtest.Chunk{{ID: ids[i], Data: data[i], Group: ids[i]}})
		if err == nil && (len(out) != 1 || !out[0].Held()) {
			err = fmt.Errorf("put %d: %v", i, out)
		}
		return err
	})
	fmt.Printf("%-6s round %d %8d bytes put %s\n", e.Name, r+1, cfg.size, put)
	if cfg.profile != "" && cfg.getLoops > 0 {
		f, err := os.Create(fmt.Sprintf("%s.%s.%d", cfg.profile, e.Name, r+1))
		if err != nil {
			return err
		}
		defer f.Close()
		runtime.SetCPUProfileRate(1000)
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for range cfg.getLoops {
		get := phase(engines, cfg.ops, func(b loadtest.Backend, i int) error {
			out, err := b.Get(ctx, ids[i:i+1], ids[i:i+1])
			if err == nil && (len(out) != 1 || !out[0].Found || len(out[0].Data) != cfg.size) {
				err = fmt.Errorf("get %d: not found or short", i)
			}
			return err
		})
		fmt.Printf("%-6s round %d %8d bytes get %s\n", e.Name, r+1, cfg.size, get)
	}
	return nil
}

// phase calls do for 0..ops-1, handed out to the engines in order, after a
// garbage collection, and reports calls/s, p50, and CPU time and minor
// faults of the process per call.
func phase(engines []loadtest.Backend, ops int, do func(b loadtest.Backend, i int) error) string {
	var next, errs atomic.Int64
	var first atomic.Pointer[string]
	lat := make([]time.Duration, ops)
	var wg sync.WaitGroup
	runtime.GC()
	r0 := usage()
	start := time.Now()
	for _, b := range engines {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= ops {
					return
				}
				t0 := time.Now()
				if err := do(b, i); err != nil && errs.Add(1) == 1 {
					msg := err.Error()
					first.Store(&msg)
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	r1 := usage()
	slices.Sort(lat)
	cpu := time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) / time.Duration(ops)
	out := fmt.Sprintf("%6.0f calls/s  p50 %7.0f µs  cpu/call %6.0f µs  faults/call %6.1f  errors %d",
		float64(ops)/elapsed.Seconds(), float64(lat[ops/2].Microseconds()), float64(cpu.Microseconds()),
		float64(r1.Minflt-r0.Minflt)/float64(ops), errs.Load())
	if p := first.Load(); p != nil {
		out += " (first: " + *p + ")"
	}
	return out
}

func usage() syscall.Rusage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru
}
