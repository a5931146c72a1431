package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/loadtest"
	"github.com/kvring/kvring/loadtest/trace"
	"github.com/kvring/kvring/store"
)

func newBenchCmd() *cobra.Command {
	var (
		addrs, admins        []string
		tracePath, namespace string
		workload             string
		synth                loadtest.SyntheticConfig
		model, dtype         string
		cfg                  loadtest.Config
		engines              int
		pin, timeout         time.Duration
		progress             time.Duration
		eagerPut             int
		ownBuffers           bool
		jsonOut              bool
		showTimeline         bool
		backendName          string
		redisAddr            string
		socketPath           string
		cpuProfile           string
		clientSec            clientSecurity
		adminSec             adminSecurity
	)
	cmd := &cobra.Command{
		Use:   "bench --addr HOST:PORT[,HOST:PORT...] | --socket PATH [--trace PATH] [flags]",
		Short: "Replay a Mooncake trace against a running cluster and report hit ratio, throughput and latency",
		Long: `Replay a Mooncake-format trace (--trace; by default the Mooncake FAST'25
synthetic trace, built into the binary) against the cluster at --addr with
--engines simulated inference engines, each its own SDK client; requests go to
the engines round-robin at their arrival times compressed by --speedup. With
--socket the engines are on the host of the node serving that local socket
instead, each with its own connection: chunks are written into shared-memory
blobs and published, and read through the mapping; the report is the same.

Each 512-token block becomes 512/--chunk-tokens chunks whose ids derive from the
block id and whose bytes (tokens × --bytes-per-token) derive from the chunk id,
so every read is verified. Per request an engine looks up its chunk ids, gets
the held prefix and puts the rest.

The report gives hit ratios beside an unbounded cache's, throughput and
latency per operation, put outcomes, corrupt reads (must be 0) and chunks
acknowledged as held but missing later. Evictions can explain the latter; they
are read from each node's GET /v1/stats when --admin lists the nodes' admin
addresses (all of them, or the count is partial; a node restarted during the
run restarts its counters too).

Failed calls do not stop the run: they are counted, and the report's timeline
(--timeline-interval) shows when they happened and how throughput and hits
changed. The table prints the timeline when something failed or --timeline is
given; --json always includes it.

A run lasts as long as the cluster takes to serve the requests, not the
trace's arrival times: the default run (the built-in trace's 3993 requests, 4
engines, three nodes on a 2-core machine) takes 4 to 5 minutes. --max-requests
or --duration shorten it. Progress goes to stderr with an estimate of the time
left: a progress bar when stderr is a terminal, otherwise a line every
--progress.

Each run writes into a namespace of its own, named on stderr and in the
report (kvring-bench-...-<UTC date and time>-<random>), so that a rerun starts
cold and its hit ratio compares with the ideal; --namespace NAME replays into
NAME instead (a second run into the same one measures a warm cache). The
namespaces of earlier runs stay until their chunks are evicted or
"kvring drop-namespace" removes them, and count against the nodes'
--max-namespaces.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			switch backendName {
			case "kvring":
				if len(addrs) == 0 && socketPath == "" {
					return errors.New("--addr is required")
				}
			case "redis":
				if redisAddr == "" {
					return errors.New("--redis-addr is required with --backend redis")
				}
			default:
				return fmt.Errorf("--backend must be kvring or redis, got %q", backendName)
			}
			if engines < 1 {
				return fmt.Errorf("--engines must be positive, got %d", engines)
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout must be positive, got %s", timeout)
			}
			if cfg.TimelineInterval <= 0 {
				return fmt.Errorf("--timeline-interval must be positive, got %s", cfg.TimelineInterval)
			}
			var reqs []trace.Request
			var err error
			switch workload {
			case "mooncake":
				if tracePath == "" {
					// Built into the binary: bench needs no file around it (a container image, a Job).
					reqs, err = trace.ReadBuiltinSynthetic()
				} else {
					reqs, err = trace.ReadFile(tracePath)
				}
				if err != nil {
					return fmt.Errorf("cannot read trace: %w", err)
				}
			case "synthetic":
				synth.Requests = cfg.MaxRequests
				if synth.Requests == 0 {
					synth.Requests = 2000
				}
				if reqs, err = loadtest.Synthetic(synth); err != nil {
					return err
				}
			default:
				return fmt.Errorf("--workload must be mooncake or synthetic, got %q", workload)
			}
			fresh := namespace == ""
			if fresh {
				// Chunk bytes derive from ids, and ids from the workload's
				// block numbers: a workload gets its own namespace so one
				// cluster can run several without their ids meeting.
				// The version of the byte generator is in the name too: a
				// cluster still holding chunks of an older bench would
				// otherwise report them corrupt. And so does the run: a
				// rerun into the last run's namespace would find its chunks
				// and report hits no cold cache gets.
				namespace = fmt.Sprintf("kvring-bench-v%d-%dt", loadtest.ChunkBytesVersion, cfg.ChunkTokens)
				if workload == "synthetic" {
					namespace += fmt.Sprintf("-synthetic-%d", synth.Seed)
				}
				if cfg.ChunksPerGroup > 1 {
					namespace += fmt.Sprintf("-g%d", cfg.ChunksPerGroup)
				}
				namespace += "-" + runID(time.Now())
			}
			ctx, stopSending, done := interruptible(cmd.Context())
			defer done()
			cfg.Stop = stopSending
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}

			var backends []loadtest.Backend
			if backendName == "redis" {
				// go-redis logs dial failures through its own global logger;
				// the report counts them, so keep them off the progress bar.
				redis.SetLogger(discardRedisLog{})
				backends, err = connectRedisEngines(ctx, engines, loadtest.RedisConfig{
					Addr: redisAddr, Namespace: namespace, CallTimeout: timeout})
			} else if socketPath != "" {
				backends, err = connectSocketEngines(ctx, engines, loadtest.SocketConfig{
					Path: socketPath, Namespace: namespace, PinTTL: pin, CallTimeout: timeout,
					Schema: local.Schema{Model: model, Dtype: dtype, TokensPerChunk: uint32(cfg.ChunkTokens),
						ChunksPerGroup: uint32(cfg.ChunksPerGroup)},
				}, timeout)
			} else {
				var conn client.ConnConfig
				clientSec.apply(&conn)
				backends, err = connectEngines(ctx, engines, loadtest.KvringConfig{
					Conn:  conn,
					Seeds: addrs, Namespace: namespace, PinTTL: pin, CallTimeout: timeout, EagerPutBytes: eagerPut,
					Schema: client.Schema{Model: model, Dtype: dtype, TokensPerChunk: uint32(cfg.ChunkTokens),
						ChunksPerGroup: uint32(cfg.ChunksPerGroup)},
					ReadBufferBytes: readBufferBytes(ownBuffers, cfg),
					Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
				}, timeout)
			}
			if err != nil {
				return err
			}
			defer func() {
				for _, b := range backends {
					b.Close()
				}
			}()
			evictionsOf := func(ctx context.Context) (map[string]uint64, error) {
				if backendName == "redis" {
					n, err := backends[0].(*loadtest.Redis).Evictions(ctx)
					if err != nil {
						return nil, err
					}
					return map[string]uint64{"lru": n}, nil
				}
				return evictions(ctx, admins, timeout, adminSec)
			}
			before, err := evictionsOf(ctx)
			if err != nil {
				return err
			}

			cfg.Backend = "kvring " + strings.Join(addrs, ",")
			if socketPath != "" {
				cfg.Backend = "kvring socket " + socketPath
			}
			if backendName == "redis" {
				cfg.Backend = "redis " + redisAddr
			}
			cfg.Namespace = namespace
			var bp *benchProgress
			if progress > 0 {
				total := len(reqs)
				if cfg.MaxRequests > 0 {
					total = min(total, cfg.MaxRequests)
				}
				errOut := cmd.ErrOrStderr()
				printBenchPlan(errOut, namespace, fresh, reqs[:total], engines, cfg)
				bp = newBenchProgress(errOut, isTerminal(errOut), total)
				cfg.ProgressInterval = progress
				if bp.bar != nil {
					cfg.ProgressInterval = min(progress, barRefresh)
				}
				cfg.OnProgress = bp.update
			}
			rep, runErr := loadtest.ReplayMooncake(ctx, reqs, backends, cfg)
			if bp != nil {
				bp.finish() // ReplayMooncake's last OnProgress call has returned
			}
			if rep == nil {
				return runErr
			}
			if workload == "synthetic" {
				rep.Workload = fmt.Sprintf("synthetic seed=%d", synth.Seed)
			}
			if after, err := evictionsOf(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "bench: cannot read evictions after the run:", oneLine(err.Error()))
			} else if after != nil {
				rep.Evictions = make(map[string]uint64)
				for k, v := range after {
					rep.Evictions[k] = v - min(v, before[k])
				}
			}
			if err := writeBenchReport(cmd.OutOrStdout(), rep, jsonOut, showTimeline); err != nil {
				return err
			}
			if runErr != nil {
				return fmt.Errorf("bench interrupted: %w", runErr)
			}
			if rep.Corrupt > 0 {
				return fmt.Errorf("%d corrupt reads", rep.Corrupt)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&backendName, "backend", "kvring", "backend under test: kvring (--addr) or redis (--redis-addr)")
	fs.StringVar(&socketPath, "socket", "", "replay through this node's local socket (kvring serve --socket) instead of gRPC: engines write chunks into shared-memory blobs and publish them, and read chunks through the mapping; --addr is then ignored")
	fs.StringVar(&redisAddr, "redis-addr", "127.0.0.1:6379", "address (HOST:PORT) of the redis-server for --backend redis")
	fs.StringSliceVar(&addrs, "addr", []string{"127.0.0.1:9600"}, "gRPC addresses (HOST:PORT, comma-separated) of kvring nodes")
	clientSec.register(fs)
	adminSec.register(fs)
	fs.StringSliceVar(&admins, "admin", nil, "admin addresses (HOST:PORT, comma-separated) of every node, to report evictions")
	fs.StringVar(&workload, "workload", "mooncake", "mooncake (replay --trace) or synthetic (shared system prompts and multi-turn conversations with Zipf popularity, generated from --seed)")
	fs.StringVar(&tracePath, "trace", "", "Mooncake-format trace (JSON lines), for --workload mooncake (default: the "+trace.BuiltinSyntheticName+")")
	fs.Int64Var(&synth.Seed, "seed", 1, "synthetic workload: random seed (the same seed gives the same requests)")
	fs.IntVar(&synth.SystemPrompts, "system-prompts", 20, "synthetic workload: distinct system prompts")
	fs.IntVar(&synth.Conversations, "conversations", 200, "synthetic workload: conversations live at a time")
	fs.Float64Var(&synth.ZipfS, "zipf", 1.1, "synthetic workload: Zipf exponent of system prompt and conversation popularity (> 1)")
	fs.Float64Var(&synth.Rate, "rate", 5, "synthetic workload: arrivals per second (Poisson), before --speedup")
	fs.StringVar(&namespace, "namespace", "", "namespace of the chunks; give the one of an earlier run to measure a warm cache (default: a new one per run, kvring-bench-v<generator version>-<chunk-tokens>t, with -synthetic-<seed> for the synthetic workload and -g<chunks-per-group> when grouped, then -<UTC date>-<time>-<random>)")
	fs.StringVar(&model, "model", "kvring-bench", "schema: model name the namespace is registered with")
	fs.StringVar(&dtype, "dtype", "bytes", "schema: KV data type")
	fs.IntVar(&engines, "engines", 4, "simulated inference engines, each with its own client")
	fs.IntVar(&cfg.ChunkTokens, "chunk-tokens", 16, "tokens per chunk (512-token blocks are split into 512/N chunks)")
	fs.BoolVar(&ownBuffers, "engine-buffers", true, "each engine reads chunks into buffers it keeps and reuses (the SDK's GetInto), as an engine reads into its KV buffers; false: a new buffer per chunk read (Get)")
	fs.IntVar(&eagerPut, "eager-put-bytes", 0, "puts of at most this many bytes send their chunks without waiting for the node's need (0: the SDK's default, 1 MiB; negative: never)")
	fs.IntVar(&cfg.ChunksPerGroup, "chunks-per-group", 0, "placement group size of the namespace (0 or 1: every chunk placed by its own id; 32: one 512-token block of 16-token chunks per group, see docs/placement.md)")
	fs.IntVar(&cfg.BytesPerToken, "bytes-per-token", 64, "chunk bytes per token")
	fs.Float64Var(&cfg.Speedup, "speedup", 100, "time compression of the trace's arrivals; negative: send every request at once")
	fs.IntVar(&cfg.MaxRequests, "max-requests", 0, "replay only the first N requests (0: all)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop sending new requests after this long (0: no cap)")
	fs.IntVar(&cfg.BatchChunks, "batch", 512, "most chunks in one get or put call")
	fs.IntVar(&cfg.LookupBatch, "lookup-batch", 8192, "most ids in one lookup call (a longer prompt is looked up in pieces)")
	fs.DurationVar(&pin, "pin", 0, "pin the chunks a lookup finds for this long while the engine reads them (0: no pins)")
	fs.DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the connections, and for each call")
	fs.DurationVar(&progress, "progress", 2*time.Second,
		"interval of the progress line on stderr when it is not a terminal; a terminal gets a progress bar (0: neither)")
	fs.DurationVar(&cfg.TimelineInterval, "timeline-interval", time.Second, "length of the intervals of the report's timeline")
	fs.BoolVar(&showTimeline, "timeline", false, "print the timeline in the table even when nothing failed")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the bench process (the load generator, not the nodes) to this file, for go tool pprof")
	fs.BoolVar(&jsonOut, "json", false, "print the report as JSON instead of a table")
	annotateEnv(fs)
	return cmd
}

// readBufferBytes is the size of the read buffers each engine reuses: one
// chunk (--chunk-tokens × --bytes-per-token), or 0 without them.
func readBufferBytes(own bool, cfg loadtest.Config) int {
	if !own {
		return 0
	}
	return cfg.ChunkTokens * cfg.BytesPerToken
}

// connectEngines creates one kvring backend per engine and waits up to
// timeout for every client to connect (awaitConnected: an address where no
// kvring node listens fails at once).
func connectEngines(ctx context.Context, n int, kc loadtest.KvringConfig, timeout time.Duration) ([]loadtest.Backend, error) {
	changed := make(chan struct{}, 1)
	user := kc.Conn.OnStateChange
	kc.Conn.OnStateChange = func(s client.ConnState) {
		if user != nil {
			user(s)
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	var out []loadtest.Backend
	closeAll := func() {
		for _, b := range out {
			b.Close()
		}
	}
	for range n {
		b, err := loadtest.NewKvring(kc)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("cannot create a client: %w", err)
		}
		out = append(out, b)
	}
	cs := make([]*client.Client, len(out))
	for i, b := range out {
		cs[i] = b.(*loadtest.Kvring).Client()
	}
	if err := awaitConnected(ctx, cs, kc.Seeds, timeout, changed); err != nil {
		closeAll()
		return nil, err
	}
	return out, nil
}

// connectSocketEngines creates one local-socket backend per engine, each
// its own connection, within timeout.
func connectSocketEngines(ctx context.Context, n int, sc loadtest.SocketConfig, timeout time.Duration) ([]loadtest.Backend, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out []loadtest.Backend
	for range n {
		s, err := loadtest.NewSocket(ctx, sc)
		if err != nil {
			for _, b := range out {
				b.Close()
			}
			return nil, fmt.Errorf("cannot connect to kvring's local socket: %s", oneLine(err.Error()))
		}
		out = append(out, s)
	}
	return out, nil
}

// discardRedisLog drops go-redis's internal log lines.
type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}

// connectRedisEngines creates one Redis backend per engine and checks that
// the server answers each of them.
func connectRedisEngines(ctx context.Context, n int, rc loadtest.RedisConfig) ([]loadtest.Backend, error) {
	var out []loadtest.Backend
	for range n {
		r, err := loadtest.NewRedis(rc)
		if err == nil {
			out = append(out, r)
			err = r.Ping(ctx)
		}
		if err != nil {
			for _, b := range out {
				b.Close()
			}
			return nil, fmt.Errorf("cannot connect to redis: %s", oneLine(err.Error()))
		}
	}
	return out, nil
}

// evictions sums the eviction counters of the nodes at admins by reason; nil
// when admins is empty.
func evictions(ctx context.Context, admins []string, timeout time.Duration, sec adminSecurity) (map[string]uint64, error) {
	if len(admins) == 0 {
		return nil, nil
	}
	sum := make(map[string]uint64)
	for _, addr := range admins {
		af := adminFlags{addr: addr, timeout: timeout, sec: sec}
		body, err := af.get(ctx, "/v1/stats")
		if err != nil {
			return nil, err
		}
		var st store.Stats
		if err := af.decode(body, &st); err != nil {
			return nil, err
		}
		for k, v := range st.Evictions {
			sum[k] += v
		}
	}
	return sum, nil
}

func writeBenchReport(w io.Writer, rep *loadtest.Report, asJSON, timeline bool) error {
	switch {
	case asJSON:
	case timeline:
		return rep.WriteTableWithTimeline(w)
	default:
		return rep.WriteTable(w)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// runID names one bench run in its namespace: the UTC time it started and
// 4 random hex digits (two runs may start in one second).
func runID(now time.Time) string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// printBenchPlan tells on w, before a run, which namespace it writes and
// what it replays: how many requests, over how long of the trace, and that
// the run takes as long as the cluster needs.
func printBenchPlan(w io.Writer, namespace string, fresh bool, reqs []trace.Request, engines int, cfg loadtest.Config) {
	if fresh {
		fmt.Fprintf(w, "bench: namespace %s, new for this run (--namespace replays into a given one, e.g. to measure a warm cache)\n", namespace)
	} else {
		fmt.Fprintf(w, "bench: namespace %s, as given: chunks earlier runs left in it count as hits\n", namespace)
	}
	if len(reqs) == 0 {
		return
	}
	span := reqs[len(reqs)-1].Timestamp - reqs[0].Timestamp
	pace := "sent as fast as the engines go (--speedup < 0)"
	if speedup := cmp.Or(cfg.Speedup, 100); speedup > 0 { // 0 is loadtest's default
		pace = fmt.Sprintf("arriving over %s (%s of trace at --speedup %g)",
			time.Duration(float64(span)/speedup).Round(time.Second), span.Round(time.Second), speedup)
	}
	dur := ""
	if cfg.Duration > 0 {
		dur = fmt.Sprintf(" or --duration %s ends it", cfg.Duration)
	}
	fmt.Fprintf(w, "bench: %d requests with %d engines, %s; the run lasts until the cluster has served them%s: the progress lines estimate the time left\n",
		len(reqs), engines, pace, dur)
}

// barRefresh is the longest time between two redraws of the progress bar.
const barRefresh = 250 * time.Millisecond

// benchProgress shows a run's progress on w: a progress bar when w is a
// terminal, a line per update otherwise (so logs stay readable). Its update
// and finish must not be called concurrently.
type benchProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar // nil: lines
}

func newBenchProgress(w io.Writer, terminal bool, total int) *benchProgress {
	p := &benchProgress{w: w}
	if terminal && total > 0 {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("bench"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("req"),
			progressbar.OptionShowIts(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetRenderBlankState(true))
	}
	return p
}

// update shows p; it is the replay's OnProgress.
func (p *benchProgress) update(pr loadtest.Progress) {
	if p.bar == nil {
		left := ""
		if pr.Done > 0 && pr.Done < pr.Total {
			left = ", about " + (pr.Elapsed * time.Duration(pr.Total-pr.Done) / time.Duration(pr.Done)).Round(time.Second).String() + " left"
		}
		fmt.Fprintf(p.w, "bench: %d/%d requests (%s) in %s%s, chunk hit ratio %.3f, %d failed calls, %d failed chunks\n",
			pr.Done, pr.Total, percent(float64(pr.Done), float64(pr.Total)), pr.Elapsed.Round(time.Second), left,
			pr.ChunkHitRatio, pr.Errors, pr.FailedChunks)
		return
	}
	_ = p.bar.Set(pr.Done)
	p.bar.Describe(fmt.Sprintf("bench: hit %.3f, %d errors", pr.ChunkHitRatio, pr.Errors))
}

// finish ends the bar's line, so what follows starts on a line of its own.
func (p *benchProgress) finish() {
	if p.bar == nil {
		return
	}
	_ = p.bar.Exit()
	fmt.Fprintln(p.w)
}

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// interruptible returns a context that the second SIGINT cancels, and a
// channel the first SIGINT closes: the bench then stops sending new requests,
// lets the calls in flight finish and reports. Call done when the bench
// ends: it stops the signal goroutine.
func interruptible(parent context.Context) (ctx context.Context, stop <-chan struct{}, done func()) {
	ctx, cancel := context.WithCancel(parent)
	stopCh := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt)
	go func() {
		defer signal.Stop(sigs)
		select {
		case <-sigs:
			close(stopCh)
			fmt.Fprintln(os.Stderr, "bench: interrupted: no new requests; waiting for the calls in flight (interrupt again to abort)")
		case <-ctx.Done():
			return
		}
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, stopCh, cancel
}
