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
	"github.com/spf13/pflag"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/loadtest"
	"github.com/kvring/kvring/loadtest/trace"
	"github.com/kvring/kvring/store"
)

// benchOptions are bench's flags.
type benchOptions struct {
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
}

const benchLong = `Replay a Mooncake-format trace (--trace; by default the Mooncake FAST'25
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
--max-namespaces.`

func newBenchCmd() *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench --addr HOST:PORT[,HOST:PORT...] | --socket PATH [--trace PATH] [flags]",
		Short: "Replay a Mooncake trace against a running cluster and report hit ratio, throughput and latency",
		Long:  benchLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			return o.run(cmd)
		},
	}
	o.register(cmd.Flags())
	annotateEnv(cmd.Flags())
	return cmd
}

// register adds bench's flags, bound to o.
func (o *benchOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.backendName, "backend", "kvring", "backend under test: kvring (--addr) or redis (--redis-addr)")
	fs.StringVar(&o.socketPath, "socket", "", "replay through this node's local socket (kvring serve --socket) instead of gRPC: engines write chunks into shared-memory blobs and publish them, and read chunks through the mapping; --addr is then ignored")
	fs.StringVar(&o.redisAddr, "redis-addr", "127.0.0.1:6379", "address (HOST:PORT) of the redis-server for --backend redis")
	fs.StringSliceVar(&o.addrs, "addr", []string{"127.0.0.1:9600"}, "gRPC addresses (HOST:PORT, comma-separated) of kvring nodes")
	o.clientSec.register(fs)
	o.adminSec.register(fs)
	fs.StringSliceVar(&o.admins, "admin", nil, "admin addresses (HOST:PORT, comma-separated) of every node, to report evictions")
	fs.StringVar(&o.workload, "workload", "mooncake", "mooncake (replay --trace) or synthetic (shared system prompts and multi-turn conversations with Zipf popularity, generated from --seed)")
	fs.StringVar(&o.tracePath, "trace", "", "Mooncake-format trace (JSON lines), for --workload mooncake (default: the "+trace.BuiltinSyntheticName+")")
	fs.Int64Var(&o.synth.Seed, "seed", 1, "synthetic workload: random seed (the same seed gives the same requests)")
	fs.IntVar(&o.synth.SystemPrompts, "system-prompts", 20, "synthetic workload: distinct system prompts")
	fs.IntVar(&o.synth.Conversations, "conversations", 200, "synthetic workload: conversations live at a time")
	fs.Float64Var(&o.synth.ZipfS, "zipf", 1.1, "synthetic workload: Zipf exponent of system prompt and conversation popularity (> 1)")
	fs.Float64Var(&o.synth.Rate, "rate", 5, "synthetic workload: arrivals per second (Poisson), before --speedup")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the chunks; give the one of an earlier run to measure a warm cache (default: a new one per run, kvring-bench-v<generator version>-<chunk-tokens>t, with -synthetic-<seed> for the synthetic workload and -g<chunks-per-group> when grouped, then -<UTC date>-<time>-<random>)")
	fs.StringVar(&o.model, "model", "kvring-bench", "schema: model name the namespace is registered with")
	fs.StringVar(&o.dtype, "dtype", "bytes", "schema: KV data type")
	fs.IntVar(&o.engines, "engines", 4, "simulated inference engines, each with its own client")
	fs.IntVar(&o.cfg.ChunkTokens, "chunk-tokens", 16, "tokens per chunk (512-token blocks are split into 512/N chunks)")
	fs.BoolVar(&o.ownBuffers, "engine-buffers", true, "each engine reads chunks into buffers it keeps and reuses (the SDK's GetInto), as an engine reads into its KV buffers; false: a new buffer per chunk read (Get)")
	fs.IntVar(&o.eagerPut, "eager-put-bytes", 0, "puts of at most this many bytes send their chunks without waiting for the node's need (0: the SDK's default, 1 MiB; negative: never)")
	fs.IntVar(&o.cfg.ChunksPerGroup, "chunks-per-group", 0, "placement group size of the namespace (0 or 1: every chunk placed by its own id; 32: one 512-token block of 16-token chunks per group, see docs/placement.md)")
	fs.IntVar(&o.cfg.BytesPerToken, "bytes-per-token", 64, "chunk bytes per token")
	fs.Float64Var(&o.cfg.Speedup, "speedup", 100, "time compression of the trace's arrivals; negative: send every request at once")
	fs.IntVar(&o.cfg.MaxRequests, "max-requests", 0, "replay only the first N requests (0: all)")
	fs.DurationVar(&o.cfg.Duration, "duration", 0, "stop sending new requests after this long (0: no cap)")
	fs.IntVar(&o.cfg.BatchChunks, "batch", 512, "most chunks in one get or put call")
	fs.IntVar(&o.cfg.LookupBatch, "lookup-batch", 8192, "most ids in one lookup call (a longer prompt is looked up in pieces)")
	fs.DurationVar(&o.pin, "pin", 0, "pin the chunks a lookup finds for this long while the engine reads them (0: no pins)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long to wait for the connections, and for each call")
	fs.DurationVar(&o.progress, "progress", 2*time.Second,
		"interval of the progress line on stderr when it is not a terminal; a terminal gets a progress bar (0: neither)")
	fs.DurationVar(&o.cfg.TimelineInterval, "timeline-interval", time.Second, "length of the intervals of the report's timeline")
	fs.BoolVar(&o.showTimeline, "timeline", false, "print the timeline in the table even when nothing failed")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the bench process (the load generator, not the nodes) to this file, for go tool pprof")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON instead of a table")
}

// validate checks the flags that need more than their type.
func (o *benchOptions) validate() error {
	switch o.backendName {
	case "kvring":
		if len(o.addrs) == 0 && o.socketPath == "" {
			return errors.New("--addr is required")
		}
	case "redis":
		if o.redisAddr == "" {
			return errors.New("--redis-addr is required with --backend redis")
		}
	default:
		return fmt.Errorf("--backend must be kvring or redis, got %q", o.backendName)
	}
	switch {
	case o.engines < 1:
		return fmt.Errorf("--engines must be positive, got %d", o.engines)
	case o.timeout <= 0:
		return fmt.Errorf("--timeout must be positive, got %s", o.timeout)
	case o.cfg.TimelineInterval <= 0:
		return fmt.Errorf("--timeline-interval must be positive, got %s", o.cfg.TimelineInterval)
	}
	return nil
}

// requests are the workload's requests: the trace, or the synthetic ones.
func (o *benchOptions) requests() ([]trace.Request, error) {
	switch o.workload {
	case "mooncake":
		var reqs []trace.Request
		var err error
		if o.tracePath == "" {
			// Built into the binary: bench needs no file around it (a container image, a Job).
			reqs, err = trace.ReadBuiltinSynthetic()
		} else {
			reqs, err = trace.ReadFile(o.tracePath)
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read trace: %w", err)
		}
		return reqs, nil
	case "synthetic":
		o.synth.Requests = o.cfg.MaxRequests
		if o.synth.Requests == 0 {
			o.synth.Requests = 2000
		}
		return loadtest.Synthetic(o.synth)
	}
	return nil, fmt.Errorf("--workload must be mooncake or synthetic, got %q", o.workload)
}

// freshNamespace is the name of a run's own namespace. Chunk bytes derive
// from ids, and ids from the workload's block numbers: a workload gets its
// own namespace so one cluster can run several without their ids meeting.
// The version of the byte generator is in the name too: a cluster still
// holding chunks of an older bench would otherwise report them corrupt. And
// so does the run: a rerun into the last run's namespace would find its
// chunks and report hits no cold cache gets.
func (o *benchOptions) freshNamespace() string {
	name := fmt.Sprintf("kvring-bench-v%d-%dt", loadtest.ChunkBytesVersion, o.cfg.ChunkTokens)
	if o.workload == "synthetic" {
		name += fmt.Sprintf("-synthetic-%d", o.synth.Seed)
	}
	if o.cfg.ChunksPerGroup > 1 {
		name += fmt.Sprintf("-g%d", o.cfg.ChunksPerGroup)
	}
	return name + "-" + runID(time.Now())
}

// startProfile starts the CPU profile of --cpuprofile, if any; stop ends it.
func (o *benchOptions) startProfile() (stop func(), err error) {
	if o.cpuProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(o.cpuProfile)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// connect opens one backend per engine: redis, the local socket or gRPC.
func (o *benchOptions) connect(ctx context.Context) ([]loadtest.Backend, error) {
	switch {
	case o.backendName == "redis":
		// go-redis logs dial failures through its own global logger; the
		// report counts them, so keep them off the progress bar.
		redis.SetLogger(discardRedisLog{})
		return connectRedisEngines(ctx, o.engines, loadtest.RedisConfig{
			Addr: o.redisAddr, Namespace: o.namespace, CallTimeout: o.timeout})
	case o.socketPath != "":
		return connectSocketEngines(ctx, o.engines, loadtest.SocketConfig{
			Path: o.socketPath, Namespace: o.namespace, PinTTL: o.pin, CallTimeout: o.timeout,
			Schema: local.Schema{Model: o.model, Dtype: o.dtype, TokensPerChunk: uint32(o.cfg.ChunkTokens),
				ChunksPerGroup: uint32(o.cfg.ChunksPerGroup)},
		}, o.timeout)
	}
	var conn client.ConnConfig
	o.clientSec.apply(&conn)
	return connectEngines(ctx, o.engines, loadtest.KvringConfig{
		Conn:  conn,
		Seeds: o.addrs, Namespace: o.namespace, PinTTL: o.pin, CallTimeout: o.timeout, EagerPutBytes: o.eagerPut,
		Schema: client.Schema{Model: o.model, Dtype: o.dtype, TokensPerChunk: uint32(o.cfg.ChunkTokens),
			ChunksPerGroup: uint32(o.cfg.ChunksPerGroup)},
		ReadBufferBytes: readBufferBytes(o.ownBuffers, o.cfg),
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	}, o.timeout)
}

// evictions reads the evictions so far: redis's, or every node's (--admin).
func (o *benchOptions) evictions(ctx context.Context, backends []loadtest.Backend) (map[string]uint64, error) {
	if o.backendName == "redis" {
		n, err := backends[0].(*loadtest.Redis).Evictions(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]uint64{"lru": n}, nil
	}
	return evictions(ctx, o.admins, o.timeout, o.adminSec)
}

// backendLabel names the backend in the report.
func (o *benchOptions) backendLabel() string {
	switch {
	case o.backendName == "redis":
		return "redis " + o.redisAddr
	case o.socketPath != "":
		return "kvring socket " + o.socketPath
	}
	return "kvring " + strings.Join(o.addrs, ",")
}

// watchProgress prints the plan and reports progress on cmd's stderr, when
// --progress asks; the returned progress (nil: none) is finished by the
// caller once the replay returned.
func (o *benchOptions) watchProgress(cmd *cobra.Command, reqs []trace.Request, fresh bool) *benchProgress {
	if o.progress <= 0 {
		return nil
	}
	total := len(reqs)
	if o.cfg.MaxRequests > 0 {
		total = min(total, o.cfg.MaxRequests)
	}
	errOut := cmd.ErrOrStderr()
	printBenchPlan(errOut, o.namespace, fresh, reqs[:total], o.engines, o.cfg)
	bp := newBenchProgress(errOut, isTerminal(errOut), total)
	o.cfg.ProgressInterval = o.progress
	if bp.bar != nil {
		o.cfg.ProgressInterval = min(o.progress, barRefresh)
	}
	o.cfg.OnProgress = bp.update
	return bp
}

// run runs the bench the flags describe and writes its report.
func (o *benchOptions) run(cmd *cobra.Command) error {
	if err := o.validate(); err != nil {
		return err
	}
	reqs, err := o.requests()
	if err != nil {
		return err
	}
	fresh := o.namespace == ""
	if fresh {
		o.namespace = o.freshNamespace()
	}
	ctx, stopSending, done := interruptible(cmd.Context())
	defer done()
	o.cfg.Stop = stopSending
	stopProfile, err := o.startProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	backends, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		for _, b := range backends {
			b.Close()
		}
	}()
	before, err := o.evictions(ctx, backends)
	if err != nil {
		return err
	}
	o.cfg.Backend, o.cfg.Namespace = o.backendLabel(), o.namespace
	bp := o.watchProgress(cmd, reqs, fresh)
	rep, runErr := loadtest.ReplayMooncake(ctx, reqs, backends, o.cfg)
	if bp != nil {
		bp.finish() // ReplayMooncake's last OnProgress call has returned
	}
	if rep == nil {
		return runErr
	}
	return o.report(ctx, cmd, rep, runErr, before, backends)
}

// report completes rep (workload, evictions during the run), writes it and
// returns the run's error, if any: interrupted, or corrupt reads.
func (o *benchOptions) report(ctx context.Context, cmd *cobra.Command, rep *loadtest.Report, runErr error,
	before map[string]uint64, backends []loadtest.Backend) error {
	if o.workload == "synthetic" {
		rep.Workload = fmt.Sprintf("synthetic seed=%d", o.synth.Seed)
	}
	if after, err := o.evictions(context.WithoutCancel(ctx), backends); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "bench: cannot read evictions after the run:", oneLine(err.Error()))
	} else if after != nil {
		rep.Evictions = make(map[string]uint64)
		for k, v := range after {
			rep.Evictions[k] = v - min(v, before[k])
		}
	}
	if err := writeBenchReport(cmd.OutOrStdout(), rep, o.jsonOut, o.showTimeline); err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("bench interrupted: %w", runErr)
	}
	if rep.Corrupt > 0 {
		return fmt.Errorf("%d corrupt reads", rep.Corrupt)
	}
	return nil
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
