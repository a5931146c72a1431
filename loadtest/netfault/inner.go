package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// innerMain runs inside the control namespace: nodes, engines, nemesis,
// checker. It returns the exit status.
func innerMain(cfgPath string) int {
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "netfault:", err)
		return 2
	}
	var cfg Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "netfault:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	evf, err := os.Create(filepath.Join(cfg.Out, "events.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "netfault:", err)
		return 2
	}
	defer evf.Close()
	r := &runner{cfg: cfg, log: io.MultiWriter(os.Stdout, evf)}
	code := r.run(ctx)
	return code
}

type runner struct {
	cfg Config
	log io.Writer
	t0  time.Time
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "[+%7.1fs %s] %s\n", time.Since(r.t0).Seconds(), time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (r *runner) run(ctx context.Context) int {
	cfg := r.cfg
	r.t0 = time.Now()
	topo := newTopology(cfg.Run, cfg.Nodes, cfg.Octet)
	c := newCluster(cfg, topo, r.t0)
	defer c.stopAll(context.WithoutCancel(ctx))
	events, err := r.schedule(topo)
	if err != nil {
		r.logf("error: %v", err)
		return 2
	}
	o := newObserver(c)
	ids, err := r.formCluster(ctx, c, o)
	if err != nil {
		r.logf("error: %v", err)
		return 2
	}
	var seeds []string
	for i := range cfg.Nodes {
		seeds = append(seeds, c.grpcAddr(i))
	}
	elog, err := os.Create(filepath.Join(cfg.Out, "engines.log"))
	if err != nil {
		r.logf("error: %v", err)
		return 2
	}
	defer elog.Close()
	h := newHistory()
	h.setPhase("warm-up")
	eng, err := newEngines(cfg, seeds, slog.New(slog.NewTextHandler(elog, nil)), h)
	if err != nil {
		r.logf("error: %v", err)
		return 2
	}
	defer eng.close()
	stopLoad := startLoad(ctx, eng)
	defer stopLoad()

	warm := cfg.Warm
	sleepCtx(ctx, warm)
	base := make([]resources, cfg.Nodes)
	for i := range base {
		base[i], _ = o.resources(ctx, i)
	}
	n := &nemesis{cfg: cfg, topo: topo, c: c, o: o, h: h, ids: ids, t0: r.t0, log: r.log}
	n.run(ctx, events)
	if ctx.Err() != nil {
		r.logf("interrupted")
		return 2
	}
	// Settle: every fault is healed; the load goes on for a while so the
	// resource figures compare like with like, then stops.
	h.setPhase("settle")
	r.logf("schedule done; load continues for %v, then stops", warm)
	sleepCtx(ctx, warm)
	stopLoad()
	eng.close()
	r.logf("load stopped; reading back every acknowledged chunk")
	ck := &checker{cfg: cfg, c: c, o: o, h: h, n: n, seeds: seeds, log: r.logf, elog: elog, base: base}
	return r.report(ck.check(ctx))
}

// schedule is the run's schedule of faults (-schedule, or a seeded random
// one), logged.
func (r *runner) schedule(topo topology) ([]event, error) {
	cfg := r.cfg
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e656d65736973))
	var events []event
	var err error
	if cfg.Schedule != "" {
		events, err = parseSchedule(cfg.Schedule, cfg.Nodes, rng)
	} else {
		events, err = randomSchedule(cfg, rng)
	}
	if err != nil {
		return nil, err
	}
	r.logf("run %s: %d nodes on %s, replication %d (and 1), seed %d, %d engines × %d calls/s, %d × %d B per put, deadline %v; no latency injected (no netem); suspicion timeout %v",
		cfg.Run, cfg.Nodes, topo.subnet, cfg.Replication, cfg.Seed, cfg.Engines, cfg.Rate, cfg.Batch, cfg.ChunkSize, cfg.Deadline, suspicionTimeout(cfg.Nodes))
	r.logf("schedule (%d events):", len(events))
	for _, e := range events {
		r.logf("  %s", e)
	}
	return events, nil
}

// formCluster starts every node and waits (60 s at most) until they form
// one ready cluster; it returns the members' ids.
func (r *runner) formCluster(ctx context.Context, c *cluster, o *observer) ([]string, error) {
	for i := range r.cfg.Nodes {
		if err := c.start(i); err != nil {
			return nil, err
		}
	}
	var ids []string
	var err error
	if _, ok := waitFor(ctx, 60*time.Second, func(ctx context.Context) bool {
		ids, err = o.ids(ctx)
		return err == nil && o.converged(ctx, ids) && o.ready(ctx)
	}); !ok {
		return nil, fmt.Errorf("the cluster did not form within 60s (%v); node logs in %s", err, r.cfg.Out)
	}
	r.logf("cluster formed: %v", ids)
	return ids, nil
}

// startLoad runs the engines' load on a goroutine once they are connected
// (a client's calls fail fast until its first connection, which is no
// fault's doing); stop ends it and waits for it, and may be called again.
func startLoad(ctx context.Context, eng *engines) (stop func()) {
	waitFor(ctx, 10*time.Second, func(context.Context) bool { return eng.connected() })
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		eng.run(lctx)
		close(done)
	}()
	return func() { cancel(); <-done }
}

// report logs the summary, writes it as summary.json and returns the run's
// exit code: 1 with violations, else 0.
func (r *runner) report(sum summary) int {
	fmt.Fprintln(r.log, sum.line())
	if b, err := json.MarshalIndent(sum, "", "  "); err == nil {
		os.WriteFile(filepath.Join(r.cfg.Out, "summary.json"), b, 0o644)
	}
	if sum.Violations > 0 {
		for _, v := range sum.Details {
			r.logf("violation: %s", v)
		}
		return 1
	}
	return 0
}
