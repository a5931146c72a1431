// Command placementsim replays traces through candidate chunk placement schemes on kvring's ring and prints a
// Markdown table of lookup fan-out, access and storage skew and data moved by a join (see package placement).
//
//	go run ./loadtest/placement/cmd/placementsim -nodes 16,64,256
package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvring/kvring/loadtest"
	"github.com/kvring/kvring/loadtest/placement"
	"github.com/kvring/kvring/node"
	"github.com/kvring/kvring/ring"
)

type options struct {
	nodes      []int
	joins      int
	mooncake   string
	aibrix     string
	synthetic  bool
	schemes    []string
	partitions int
	load       float64
	vnodes     int
	seed       uint64
	parallel   int
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "placementsim:", err)
		os.Exit(1)
	}
}

func parse(args []string) (options, error) {
	ringCfg := node.DefaultConfig().Membership.Ring
	fs := flag.NewFlagSet("placementsim", flag.ContinueOnError)
	nodes := fs.String("nodes", "16,64,256", "comma-separated cluster sizes")
	schemes := fs.String("schemes", "", "comma-separated scheme names (default: all of placement.DefaultSchemes)")
	o := options{}
	fs.IntVar(&o.joins, "joins", 3, "joiners averaged over for the moved-keys figure (node-N, node-N+1, …)")
	fs.StringVar(&o.mooncake, "mooncake", "loadtest/trace/testdata/synthetic_trace.jsonl", "Mooncake trace (\"\" to skip)")
	fs.StringVar(&o.aibrix, "aibrix", "loadtest/placement/testdata/realistic-prefix-share-workload-p1024-s128-rps5.jsonl",
		"AIBrix text-prompt workload (\"\" to skip)")
	fs.BoolVar(&o.synthetic, "synthetic", true, "include loadtest.Synthetic's default workload (seeded by -seed)")
	fs.IntVar(&o.partitions, "partitions", ringCfg.PartitionCount, "ring partition count (node default)")
	fs.Float64Var(&o.load, "load", ringCfg.Load, "ring bounded-load factor (node default)")
	fs.IntVar(&o.vnodes, "vnodes", ringCfg.VirtualNodes, "ring virtual nodes per member (node default)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the synthetic workload and of the access floor's draws")
	fs.IntVar(&o.parallel, "parallel", runtime.GOMAXPROCS(0), "simulations run at once")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, s := range strings.Split(*nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("bad -nodes entry %q", s)
		}
		o.nodes = append(o.nodes, n)
	}
	if *schemes != "" {
		o.schemes = strings.Split(*schemes, ",")
	}
	if o.joins < 1 || o.parallel < 1 {
		return o, errors.New("-joins and -parallel must be positive")
	}
	return o, nil
}

func run(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	start := time.Now()
	cfg := node.DefaultConfig().Membership.Ring
	cfg.PartitionCount, cfg.Load, cfg.VirtualNodes = o.partitions, o.load, o.vnodes
	cfg = placement.SimRingConfig(cfg)

	var schemes []placement.Scheme
	for _, s := range placement.DefaultSchemes() {
		if o.schemes == nil || slices.Contains(o.schemes, s.Name) {
			schemes = append(schemes, s)
		}
	}
	if len(schemes) == 0 {
		return fmt.Errorf("no scheme matches -schemes %v", o.schemes)
	}

	workloads, err := loadWorkloads(o, cfg)
	if err != nil {
		return err
	}
	topologies := make([]*placement.Topology, len(o.nodes))
	if err := parallel(len(o.nodes), o.parallel, func(i int) error {
		t, err := placement.NewTopology(o.nodes[i], o.joins, cfg)
		topologies[i] = t
		return err
	}); err != nil {
		return err
	}

	type job struct {
		w *placement.Workload
		t *placement.Topology
		s placement.Scheme
	}
	var jobs []job
	for _, w := range workloads {
		for _, t := range topologies {
			for _, s := range schemes {
				jobs = append(jobs, job{w, t, s})
			}
		}
	}
	results := make([]placement.Result, len(jobs))
	if err := parallel(len(jobs), o.parallel, func(i int) error {
		r, err := placement.Simulate(jobs[i].w, jobs[i].t, jobs[i].s, o.seed)
		results[i] = r
		return err
	}); err != nil {
		return err
	}
	fmt.Printf("ring: %d partitions, load %v, %d virtual nodes; moved averaged over %d joiners; seed %d\n\n",
		cfg.PartitionCount, cfg.Load, cfg.VirtualNodes, o.joins, o.seed)
	for _, t := range topologies {
		fmt.Printf("- N=%d: partitions per node max/mean %.3f, ring build %s (best of 5)\n", t.N(), t.Base.PartitionSkew(),
			buildTime(t.N(), cfg))
	}
	fmt.Println()
	if err := placement.WriteTable(os.Stdout, results, placement.DefaultGoals()); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "done in %v\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// loadWorkloads reads the workloads the options name: the Mooncake trace,
// the AIBrix prompts and the synthetic workload, each placed with cfg.
func loadWorkloads(o options, cfg ring.Config) ([]*placement.Workload, error) {
	var workloads []*placement.Workload
	if o.mooncake != "" {
		w, err := placement.MooncakeFile("mooncake", o.mooncake, cfg, placement.DefaultNamespace)
		if err != nil {
			return nil, err
		}
		workloads = append(workloads, w)
	}
	if o.aibrix != "" {
		w, err := placement.TextPromptsFile("aibrix", o.aibrix, cfg, placement.DefaultNamespace)
		if err != nil {
			return nil, err
		}
		workloads = append(workloads, w)
	}
	if o.synthetic {
		reqs, err := loadtest.Synthetic(loadtest.SyntheticConfig{Seed: int64(o.seed)})
		if err != nil {
			return nil, err
		}
		w, err := placement.FromMooncake("synthetic", reqs, cfg, placement.DefaultNamespace)
		if err != nil {
			return nil, err
		}
		workloads = append(workloads, w)
	}
	for _, w := range workloads {
		fmt.Fprintf(os.Stderr, "workload %s: %d requests, %d chunk references, %d chunk ids\n",
			w.Name, len(w.Prompts), w.References(), len(w.Parts))
	}
	return workloads, nil
}

// buildTime is the best of five ring.New calls over n members with cfg, the work a node and an SDK do on a
// membership change (with every partition's owners up to cfg.ReplicationFactor, MaxReplicas here).
func buildTime(n int, cfg ring.Config) time.Duration {
	members := make([]ring.Member, n)
	for i, id := range placement.NodeIDs(n) {
		members[i] = ring.Member{ID: id}
	}
	best := time.Duration(math.MaxInt64)
	for range 5 {
		start := time.Now()
		if _, err := ring.New(members, 1, cfg); err != nil {
			return 0
		}
		best = min(best, time.Since(start))
	}
	return best.Round(10 * time.Microsecond)
}

// parallel calls f(0) … f(n-1) on at most width goroutines and returns the errors joined.
func parallel(n, width int, f func(int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, width)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
