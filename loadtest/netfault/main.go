// Command netfault runs a kvring cluster in network namespaces under a
// seeded schedule of network faults, process pauses and kills, drives it with
// engines built on the Go SDK, and checks the whole history: nothing
// acknowledged is lost, no read is corrupt, no call outlives its deadline, no
// write is reported stored on a node that could not have stored it, gossip
// converges after every heal within a measured bound, and nodes do not grow.
//
// Every node has a network namespace of its own with one address on a Linux
// bridge; the bridge lives in a switch namespace, where an nftables bridge
// table cuts, drops (numgen random) or lets frames pass, and tbf qdiscs on
// the links cap bandwidth. The engines and the observer run in a control
// namespace of their own, attached to the same bridge and never partitioned
// (their links share random loss). The kernel has no netem, so no latency is
// injected beyond the queueing a bandwidth cap causes.
//
// The process that is started (the outer one) makes the namespaces and
// removes them, with every process inside, when it exits or is interrupted;
// it runs itself again inside the control namespace (the inner one) to start
// the nodes, the nemesis, the engines and the checker. Everything it names
// starts with "kvnf" and a run id that it holds a lock on (/run/kvnf) while
// it lives, and every run first sweeps what dead runs left, even SIGKILLed
// ones (namespaces with any process still in them, /dev/shm directories,
// scratch directories, lock files), never a live run's.
//
// It needs root, iproute2, nftables and tc. Usage:
//
//	go build -o /tmp/kvring ./cmd/kvring
//	go run ./loadtest/netfault -kvring /tmp/kvring -nodes 5 -duration 10m -seed 1
//
// The last line of output is the summary (acknowledged N, lost 0, ...); the
// exit status is 1 when the checker found a violation, 2 when the harness
// itself failed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// Config is one run's settings; the outer process passes it to the inner
// one as JSON.
type Config struct {
	Kvring      string        // the kvring binary
	Nodes       int           // 1..16
	Seed        uint64        // seeds the schedule and the engines' chunks
	Duration    time.Duration // of the fault schedule (warm-up and the final settle come on top)
	Replication int           // of the main namespace; a second namespace has replication 1
	Engines     int           // engine clients, each with its own SDK client
	Rate        int           // operations per second per engine
	ChunkSize   int           // bytes per chunk
	Batch       int           // chunks per put
	Deadline    time.Duration // of every engine call
	Faults      string        // comma-separated fault kinds the nemesis may pick, or "all"
	Schedule    string        // a fixed schedule instead of a random one: "loss5:120s" etc. (see parseSchedule)
	FaultMin    time.Duration // shortest fault
	FaultMax    time.Duration // longest fault
	QuietMin    time.Duration // shortest quiet time between faults
	QuietMax    time.Duration
	Warm        time.Duration // load before the first fault, and after the last heal
	Settle      time.Duration // bound on the final convergence and reads
	Converge    time.Duration // bound on convergence after each heal (0: twice the suspicion timeout)
	// Detect bounds the time until lost nodes are off the others' ring, for
	// faults that last longer (0: twice the suspicion timeout; negative:
	// not checked).
	Detect      time.Duration
	MemoryLimit string   // per node
	Out         string   // directory for logs, events and the summary (default: the run's scratch directory, removed)
	ExtraArgs   []string // appended to every node's serve flags

	Run    string // run id (set by the outer process)
	Octet  byte   // third octet of the run's subnet
	Dir    string // the run's scratch directory
	Expect string // "pass" (default) or a violation the run must find, for reproductions
}

func defaultConfig() Config {
	return Config{
		Nodes: 5, Seed: 1, Duration: 10 * time.Minute, Replication: 2, Engines: 4, Rate: 10,
		ChunkSize: 4 << 10, Batch: 8, Deadline: 5 * time.Second, Faults: "all",
		FaultMin: 5 * time.Second, FaultMax: 30 * time.Second, QuietMin: 10 * time.Second, QuietMax: 20 * time.Second,
		Warm: 10 * time.Second, Settle: 90 * time.Second, MemoryLimit: "1GiB",
	}
}

const innerEnv = "KVNF_INNER_CONFIG"

func main() {
	if path := os.Getenv(innerEnv); path != "" {
		os.Exit(innerMain(path))
	}
	cfg := defaultConfig()
	flag.StringVar(&cfg.Kvring, "kvring", "kvring", "the kvring binary")
	flag.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "kvring nodes (1-16)")
	flag.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the fault schedule and of the engines' chunks")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of the fault schedule")
	flag.IntVar(&cfg.Replication, "replication", cfg.Replication, "replication factor of the main namespace (a second one has 1)")
	flag.IntVar(&cfg.Engines, "engines", cfg.Engines, "engines (SDK clients)")
	flag.IntVar(&cfg.Rate, "rate", cfg.Rate, "operations per second per engine")
	flag.IntVar(&cfg.ChunkSize, "chunk-size", cfg.ChunkSize, "bytes per chunk")
	flag.IntVar(&cfg.Batch, "batch", cfg.Batch, "chunks per put")
	flag.DurationVar(&cfg.Deadline, "deadline", cfg.Deadline, "deadline of every engine call")
	flag.StringVar(&cfg.Faults, "faults", cfg.Faults, "fault kinds to pick from: all, or a comma-separated list of "+faultKindList())
	flag.StringVar(&cfg.Schedule, "schedule", "", "a fixed schedule instead of a random one, e.g. \"isolate:20s,quiet:30s,loss5:120s\"")
	flag.DurationVar(&cfg.FaultMin, "fault-min", cfg.FaultMin, "shortest fault")
	flag.DurationVar(&cfg.FaultMax, "fault-max", cfg.FaultMax, "longest fault (pauses last 2-30 s whatever this says)")
	flag.DurationVar(&cfg.QuietMin, "quiet-min", cfg.QuietMin, "shortest quiet time between faults")
	flag.DurationVar(&cfg.QuietMax, "quiet-max", cfg.QuietMax, "longest quiet time between faults")
	flag.DurationVar(&cfg.Warm, "warm", cfg.Warm, "load before the first fault and after the last heal")
	flag.DurationVar(&cfg.Settle, "settle", cfg.Settle, "bound on convergence after the last heal and on the final reads")
	flag.DurationVar(&cfg.Converge, "converge-bound", 0, "a heal must be followed by convergence within this (default: twice memberlist's suspicion timeout)")
	flag.DurationVar(&cfg.Detect, "detect-bound", 0, "nodes cut off, paused or killed for longer must be off the others' ring within this (default: twice memberlist's suspicion timeout; negative: not checked)")
	flag.StringVar(&cfg.MemoryLimit, "memory-limit", cfg.MemoryLimit, "each node's --memory-limit")
	flag.StringVar(&cfg.Out, "out", "", "directory for node logs, the event log and summary.json (default: removed at exit)")
	flag.Parse()
	cfg.ExtraArgs = flag.Args()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "netfault:", err)
		os.Exit(2)
	}
	os.Exit(outerMain(ctx, cfg, exe, nil, os.Stdout, os.Stderr))
}

// outerMain sets up the run's namespaces, runs exe (this program, or a test
// binary that calls innerMain when innerEnv is set) inside the control
// namespace, and removes everything when that ends or ctx is cancelled. It
// returns the exit status: 0 pass, 1 violation, 2 harness failure.
func outerMain(ctx context.Context, cfg Config, exe string, exeArgs []string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, "netfault:", err)
		return 2
	}
	if os.Geteuid() != 0 {
		return fail(errors.New("needs root (network namespaces, nftables, tc)"))
	}
	if cfg.Nodes < 1 || cfg.Nodes > 16 {
		return fail(fmt.Errorf("-nodes %d: want 1 to 16", cfg.Nodes))
	}
	if err := checkTools(ctx); err != nil {
		return fail(err)
	}
	lock, err := claimRun()
	if err != nil {
		return fail(err)
	}
	defer lock.release() // last: after everything the run made is gone
	tmp := os.TempDir()
	if err := sweepStale(ctx, tmp); err != nil {
		fmt.Fprintln(stderr, "netfault: sweeping dead runs:", err)
	}
	cfg.Run = lock.run
	cfg.Octet = lock.octet()
	cfg.Dir = filepath.Join(tmp, cfg.Run)
	if err := makeRunDir(cfg.Dir); err != nil {
		return fail(fmt.Errorf("cannot make the run's scratch directory: %w", err))
	}
	if cfg.Out == "" {
		cfg.Out = filepath.Join(cfg.Dir, "out")
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return fail(err)
	}
	topo := newTopology(cfg.Run, cfg.Nodes, cfg.Octet)
	defer func() {
		// A fresh context: cleanup must run after an interrupt too.
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := topo.down(cctx); err != nil {
			fmt.Fprintln(stderr, "netfault: cleanup:", err)
		}
		for i := range cfg.Nodes {
			os.RemoveAll(shmDir(cfg, i))
		}
		os.RemoveAll(cfg.Dir)
	}()
	if err := topo.up(ctx); err != nil {
		return fail(fmt.Errorf("cannot set up the network: %w", err))
	}
	b, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(cfg.Dir, "config.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		return fail(err)
	}
	return runInner(ctx, topo, cfgPath, exe, exeArgs, stdout, stderr)
}

// runInner runs exe inside the control namespace with the run's config at
// cfgPath until it ends, or until ctx is cancelled (then it is stopped:
// SIGTERM, SIGKILL after 20 s). It returns the run's exit status.
func runInner(ctx context.Context, topo topology, cfgPath, exe string, exeArgs []string, stdout, stderr io.Writer) int {
	cmd := exec.Command("ip", append([]string{"netns", "exec", topo.ctlNS(), exe}, exeArgs...)...)
	cmd.Env = append(os.Environ(), innerEnv+"="+cfgPath)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "netfault:", err)
		return 2
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		fmt.Fprintln(stderr, "netfault: interrupted; stopping the run and removing its namespaces")
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		return 2
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		fmt.Fprintln(stderr, "netfault:", err)
		return 2
	}
	return 0
}

// checkTools fails when a tool the harness runs is missing.
func checkTools(ctx context.Context) error {
	for _, tool := range []string{"ip", "nft", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("needs %s: %w", tool, err)
		}
	}
	return nil
}
