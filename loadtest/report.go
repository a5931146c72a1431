package loadtest

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the outcome of a run. Its JSON form is what `kvring bench --json`
// prints.
type Report struct {
	Backend string `json:"backend"`
	// Namespace is the namespace the run wrote and read ("" when not given).
	Namespace     string  `json:"namespace,omitempty"`
	Workload      string  `json:"workload"`
	Engines       int     `json:"engines"`
	ChunkTokens   int     `json:"chunk_tokens"`
	BytesPerToken int     `json:"bytes_per_token"`
	Speedup       float64 `json:"speedup"`

	// RequestsPlanned were taken from the trace; RequestsDone completed
	// before the end of the run (a --duration cap stops the rest).
	RequestsPlanned int           `json:"requests_planned"`
	RequestsDone    int           `json:"requests_done"`
	Elapsed         time.Duration `json:"elapsed_ns"`
	StoppedEarly    bool          `json:"stopped_early"`
	// StartedAt is when the replay started (UTC): the origin of the
	// timeline, to line it up with events outside the run.
	StartedAt time.Time `json:"started_at"`

	// Chunks and Tokens count what the done requests referenced; the hits
	// are the verified leading chunks each request could reuse.
	Chunks        int64   `json:"chunks"`
	ChunkHits     int64   `json:"chunk_hits"`
	ChunkHitRatio float64 `json:"chunk_hit_ratio"`
	Tokens        int64   `json:"tokens"`
	TokenHits     int64   `json:"token_hits"`
	TokenHitRatio float64 `json:"token_hit_ratio"`
	// Ideal* are the same ratios for an unbounded cache over the planned
	// requests (a chunk hits when its id was referenced before); IdealBlock
	// is trace.Stats's block-level figure.
	IdealChunkHitRatio float64 `json:"ideal_chunk_hit_ratio"`
	IdealTokenHitRatio float64 `json:"ideal_token_hit_ratio"`
	IdealBlockHitRatio float64 `json:"ideal_block_hit_ratio"`

	Lookup OpStats `json:"lookup"`
	Get    OpStats `json:"get"`
	Put    OpStats `json:"put"`

	// Put outcomes, by chunk.
	Stored      int64 `json:"stored"`
	AlreadyHeld int64 `json:"already_held"`
	Rejected    int64 `json:"rejected"`
	Failed      int64 `json:"failed"`
	// FirstChunkFailure is why the first chunk a put left unheld (rejected
	// or failed) was, as the backend said; "" when none was, or the backend
	// gives no reasons.
	FirstChunkFailure string `json:"first_chunk_failure,omitempty"`
	// GetMisses are chunks a lookup reported held that Get did not return.
	GetMisses int64 `json:"get_misses"`
	// Corrupt counts chunks returned with bytes other than the ones derived
	// from their id. Must be 0.
	Corrupt int64 `json:"corrupt"`
	// MissingAfterAck counts chunks the backend acknowledged holding (stored
	// or already held) that a lookup or get begun after the ack (after the
	// acknowledging put call returned) reported missing; a call that began
	// before the ack raced with the put and counts for nothing. Each loss
	// counts once until the chunk is acknowledged again. Evictions
	// explain such losses; Evictions (when known) lets a reader judge.
	MissingAfterAck int64 `json:"missing_after_ack"`
	// MissingFoundLater counts the chunks of MissingAfterAck found held
	// later without being stored again: by a later put that was answered
	// already held, or by a lookup after the run. They were unreachable for a
	// while (their node was down), not lost. The rest, less what evictions
	// explain, are losses.
	MissingFoundLater int64 `json:"missing_found_later"`
	// MissingSample names up to 20 chunks missing after an ack and not found
	// again, for whoever investigates: "block/index id".
	MissingSample []string `json:"missing_sample,omitempty"`
	// Evictions are the backend's eviction counters by reason over the run,
	// nil when unknown (for kvring: no --admin addresses given).
	Evictions map[string]uint64 `json:"evictions"` // null when unknown

	// Timeline splits the run into intervals of Config.TimelineInterval,
	// so a reader sees throughput, hits and failures change over the run
	// (a node going down and coming back, say).
	Timeline []TimelinePoint `json:"timeline"`
}

// OpStats describes one kind of call.
type OpStats struct {
	Calls     int64   `json:"calls"`
	Errors    int64   `json:"errors"` // calls that failed as a whole
	Chunks    int64   `json:"chunks"`
	Bytes     int64   `json:"bytes"`
	OpsPerSec float64 `json:"ops_per_sec"`
	GBPerSec  float64 `json:"gb_per_sec"` // 1e9 bytes per second
	P50Ms     float64 `json:"p50_ms"`
	P95Ms     float64 `json:"p95_ms"`
	P99Ms     float64 `json:"p99_ms"`
	// FirstError is the first failed call's error, "" when none failed.
	FirstError string `json:"first_error,omitempty"`
}

// opTally accumulates one kind of call on one engine.
type opTally struct {
	calls, errors, chunks, bytes int64
	lat                          []time.Duration
	firstErr                     string
}

func (t *opTally) record(d time.Duration, chunks, bytes int, err error) {
	t.calls++
	t.lat = append(t.lat, d)
	if err != nil {
		if t.errors == 0 {
			t.firstErr = err.Error()
		}
		t.errors++
		return
	}
	t.chunks += int64(chunks)
	t.bytes += int64(bytes)
}

func (t *opTally) merge(o *opTally) {
	if t.firstErr == "" {
		t.firstErr = o.firstErr
	}
	t.calls += o.calls
	t.errors += o.errors
	t.chunks += o.chunks
	t.bytes += o.bytes
	t.lat = append(t.lat, o.lat...)
}

// stats summarizes the tally over a run of length elapsed. It sorts t.lat.
func (t *opTally) stats(elapsed time.Duration) OpStats {
	slices.Sort(t.lat)
	s := OpStats{Calls: t.calls, Errors: t.errors, Chunks: t.chunks, Bytes: t.bytes,
		P50Ms: ms(percentile(t.lat, 0.50)), P95Ms: ms(percentile(t.lat, 0.95)), P99Ms: ms(percentile(t.lat, 0.99)), FirstError: t.firstErr}
	if sec := elapsed.Seconds(); sec > 0 {
		s.OpsPerSec = float64(t.calls) / sec
		s.GBPerSec = float64(t.bytes) / sec / 1e9
	}
	return s
}

// percentile returns the nearest-rank q-quantile of sorted, 0 when empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(q*float64(len(sorted))+0.999999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// tally is what one engine counts; the Runner merges the engines' tallies.
type tally struct {
	requests                            int
	chunks, chunkHits, tokens, tokenHit int64
	lookup, get, put                    opTally
	byOutcome                           [Failed + 1]int64
	getMisses, corrupt, missingAfterAck int64
	timeline                            timeline
	firstChunkFailure                   string // why the first chunk left unheld was (backends that say)
}

func (t *tally) merge(o *tally) {
	t.requests += o.requests
	t.chunks += o.chunks
	t.chunkHits += o.chunkHits
	t.tokens += o.tokens
	t.tokenHit += o.tokenHit
	t.lookup.merge(&o.lookup)
	t.get.merge(&o.get)
	t.put.merge(&o.put)
	for i := range t.byOutcome {
		t.byOutcome[i] += o.byOutcome[i]
	}
	t.getMisses += o.getMisses
	t.corrupt += o.corrupt
	t.missingAfterAck += o.missingAfterAck
	t.timeline.merge(&o.timeline)
	if t.firstChunkFailure == "" {
		t.firstChunkFailure = o.firstChunkFailure
	}
}

// fill sets r's counters from t.
func (t *tally) fill(r *Report) {
	r.RequestsDone = t.requests
	r.Chunks, r.ChunkHits, r.ChunkHitRatio = t.chunks, t.chunkHits, ratio(t.chunkHits, t.chunks)
	r.Tokens, r.TokenHits, r.TokenHitRatio = t.tokens, t.tokenHit, ratio(t.tokenHit, t.tokens)
	r.Lookup, r.Get, r.Put = t.lookup.stats(r.Elapsed), t.get.stats(r.Elapsed), t.put.stats(r.Elapsed)
	r.Stored, r.AlreadyHeld = t.byOutcome[Stored], t.byOutcome[AlreadyHeld]
	r.Rejected, r.Failed = t.byOutcome[Rejected], t.byOutcome[Failed]
	r.GetMisses, r.Corrupt, r.MissingAfterAck = t.getMisses, t.corrupt, t.missingAfterAck
	r.FirstChunkFailure = t.firstChunkFailure
	r.Timeline = t.timeline.points(r.Elapsed)
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// WriteTable prints the report as aligned tables. The timeline is printed
// too when it has more than one point and a call or a put chunk failed.
func (r *Report) WriteTable(w io.Writer) error {
	return r.writeTable(w, r.Lookup.Errors+r.Get.Errors+r.Put.Errors+r.Failed > 0)
}

// WriteTableWithTimeline is WriteTable printing the timeline whenever it has
// more than one point.
func (r *Report) WriteTableWithTimeline(w io.Writer) error { return r.writeTable(w, true) }

func (r *Report) writeTable(w io.Writer, withTimeline bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	row := func(k, f string, a ...any) { fmt.Fprintf(tw, "%s\t"+f+"\n", append([]any{k}, a...)...) }
	row("backend", "%s (%s), %d engines, %d tokens/chunk, %d B/token, speedup %gx",
		r.Backend, r.Workload, r.Engines, r.ChunkTokens, r.BytesPerToken, r.Speedup)
	if r.Namespace != "" {
		row("namespace", "%s", r.Namespace)
	}
	stop := ""
	if r.StoppedEarly {
		stop = " (stopped early by --duration)"
	}
	row("requests", "%d of %d in %s%s", r.RequestsDone, r.RequestsPlanned, r.Elapsed.Round(time.Millisecond), stop)
	row("hit ratio, chunks", "%.4f (%d of %d; unbounded ideal %.4f)", r.ChunkHitRatio, r.ChunkHits, r.Chunks, r.IdealChunkHitRatio)
	row("hit ratio, tokens", "%.4f (%d of %d; unbounded ideal %.4f, blocks %.4f)", r.TokenHitRatio, r.TokenHits, r.Tokens,
		r.IdealTokenHitRatio, r.IdealBlockHitRatio)
	row("puts", "stored=%d already_held=%d rejected=%d failed=%d", r.Stored, r.AlreadyHeld, r.Rejected, r.Failed)
	row("reads", "get_misses=%d corrupt=%d missing_after_ack=%d (found again after the run: %d)", r.GetMisses, r.Corrupt,
		r.MissingAfterAck, r.MissingFoundLater)
	ev := "unknown (no admin addresses)"
	if r.Evictions != nil {
		ev = ByReason(r.Evictions)
	}
	row("evictions", "%s", ev)
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "OP\tCALLS\tERRORS\tCHUNKS\tBYTES\tOPS/S\tGB/S\tP50 MS\tP95 MS\tP99 MS")
	for _, op := range []struct {
		name string
		s    OpStats
	}{{"lookup", r.Lookup}, {"get", r.Get}, {"put", r.Put}} {
		s := op.s
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%.3f\t%.2f\t%.2f\t%.2f\n", op.name, s.Calls, s.Errors, s.Chunks, s.Bytes,
			s.OpsPerSec, s.GBPerSec, s.P50Ms, s.P95Ms, s.P99Ms)
	}
	for _, op := range []struct {
		name string
		s    OpStats
	}{{"lookup", r.Lookup}, {"get", r.Get}, {"put", r.Put}} {
		if op.s.FirstError != "" {
			fmt.Fprintf(tw, "first %s error: %s\n", op.name, strings.Join(strings.Fields(op.s.FirstError), " "))
		}
	}
	if r.FirstChunkFailure != "" {
		fmt.Fprintf(tw, "first chunk not held: %s\n", strings.Join(strings.Fields(r.FirstChunkFailure), " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !withTimeline || len(r.Timeline) < 2 {
		return nil
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	return writeTimeline(w, r.Timeline)
}

// ByReason formats counters by reason, as a node's /v1/stats gives its
// evictions and rejections: "capacity=3 policy=1", or "none".
func ByReason(m map[string]uint64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
