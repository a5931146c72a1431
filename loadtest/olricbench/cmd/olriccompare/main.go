// Command olriccompare starts a three-node kvring cluster and a three-node
// Olric cluster in this process, with equal memory per node and replication
// 1, puts and gets values of 256 KiB and 2 MiB one per call with four
// workers against each, and prints both systems' throughput and latency with
// the ratios kvring/olric, round by round.
//
//	cd loadtest/olricbench && go run ./cmd/olriccompare [-ops 128] [-rounds 3]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/kvring/kvring/loadtest/olricbench"
)

func main() {
	var (
		cfg      olricbench.CompareConfig
		memMiB   int
		tableMiB int
		sizes    string
		bufs     bool
	)
	flag.IntVar(&cfg.Ops, "ops", 128, "puts (and gets) per size, system and round")
	flag.IntVar(&cfg.Workers, "workers", 4, "engines calling in parallel, each with its own client")
	flag.IntVar(&cfg.Rounds, "rounds", 3, "rounds; each runs both systems, in alternating order")
	flag.IntVar(&memMiB, "memory-mib", 1024, "memory per node in MiB: kvring --memory-limit, Olric DMaps.MaxInuse (which Olric splits evenly over the partitions a node owns)")
	flag.IntVar(&tableMiB, "olric-table-mib", 4, "Olric kvstore tableSize in MiB (must exceed the largest value)")
	flag.StringVar(&sizes, "sizes", "256KiB,2MiB", "value sizes, comma-separated, in KiB or MiB")
	flag.BoolVar(&bufs, "engine-buffers", false, "kvring's engines read into one reused buffer each (the SDK's GetInto) instead of a new buffer per value, as Olric's client returns")
	flag.Parse()
	for _, s := range strings.Split(sizes, ",") {
		var n int
		var unit string
		if _, err := fmt.Sscanf(s, "%d%s", &n, &unit); err != nil || (unit != "KiB" && unit != "MiB") {
			fail(fmt.Errorf("-sizes: cannot read %q (want e.g. 256KiB)", s))
		}
		if unit == "KiB" {
			cfg.Sizes = append(cfg.Sizes, n<<10)
		} else {
			cfg.Sizes = append(cfg.Sizes, n<<20)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	readBuf := 0
	if bufs {
		readBuf = slices.Max(cfg.Sizes)
	}
	if err := run(ctx, cfg, memMiB, tableMiB, readBuf); err != nil {
		fail(err)
	}
}

func run(ctx context.Context, cfg olricbench.CompareConfig, memMiB, tableMiB, readBuf int) (err error) {
	closeCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	}
	kv, err := olricbench.StartKvringCluster(ctx, olricbench.KvringClusterConfig{MemoryPerNode: int64(memMiB) << 20})
	if err != nil {
		return err
	}
	defer func() {
		c, cancel := closeCtx()
		defer cancel()
		if cerr := kv.Close(c); cerr != nil && err == nil {
			err = cerr
		}
	}()
	ol, err := olricbench.StartCluster(ctx, olricbench.ClusterConfig{MemoryPerNode: memMiB << 20, TableSize: tableMiB << 20})
	if err != nil {
		return err
	}
	defer func() {
		c, cancel := closeCtx()
		defer cancel()
		if cerr := ol.Close(c); cerr != nil && err == nil {
			err = cerr
		}
	}()
	fmt.Printf("kvring nodes %v, olric nodes %v; %d MiB per node, replication 1, olric tableSize %d MiB\n",
		kv.Addrs(), ol.Addrs(), memMiB, tableMiB)
	fmt.Printf("%d workers, %d values per size, system and round, one value per call\n\n", cfg.Workers, cfg.Ops)
	rows, err := olricbench.Compare(ctx, olricbench.KvringEngines(kv.Addrs(), readBuf), olricbench.OlricEngines(ol.Addrs()), cfg)
	if werr := olricbench.WriteRows(os.Stdout, rows); werr != nil && err == nil {
		err = werr
	}
	return err
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "olriccompare:", err)
	os.Exit(1)
}
