package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/loadtest"
)

func TestBenchReplaysATraceWithVerifiedReads(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t)
	tracePath := filepath.Join("..", "..", "loadtest", "trace", "testdata", "synthetic_trace.jsonl")
	args := []string{"bench", "--addr", nodes[0].grpc + "," + nodes[1].grpc,
		"--admin", nodes[0].admin + "," + nodes[1].admin + "," + nodes[2].admin,
		"--trace", tracePath, "--max-requests", "20", "--speedup", "-1", "--engines", "2", "--namespace", "e2e/bench",
		"--timeout", benchCallTimeout, "--json"} // last: the table run below drops it
	run := func() loadtest.Report {
		t.Helper()
		r := mustCLI(t, nil, args...)
		var rep loadtest.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("bench --json printed no report: %v: %v", err, r)
		}
		if rep.RequestsDone != 20 || rep.Corrupt != 0 || rep.Failed != 0 || rep.MissingAfterAck != 0 || rep.Evictions == nil {
			t.Fatalf("report: %+v", rep)
		}
		var done, hits int64
		for _, p := range rep.Timeline {
			done += p.Requests
			hits += p.ChunkHits
		}
		if len(rep.Timeline) == 0 || done != 20 || hits != rep.ChunkHits {
			t.Fatalf("timeline counts %d requests and %d hits, report %d and %d: %+v", done, hits, rep.RequestsDone,
				rep.ChunkHits, rep.Timeline)
		}
		return rep
	}
	first := run()
	if first.Stored == 0 || first.ChunkHitRatio != first.IdealChunkHitRatio {
		t.Fatalf("first run: stored %d, hit ratio %v, ideal %v", first.Stored, first.ChunkHitRatio, first.IdealChunkHitRatio)
	}
	// Nothing was evicted (20 requests fit in the nodes' budget), so the
	// same replay finds every chunk.
	if second := run(); second.ChunkHitRatio != 1 || second.Stored != 0 {
		t.Fatalf("second run: hit ratio %v, stored %d", second.ChunkHitRatio, second.Stored)
	}

	// The table shows the timeline when asked; stderr, not a terminal,
	// gets plain progress lines, the last one when the run ends.
	// --cpuprofile writes a CPU profile of the bench process (gzipped).
	profile := filepath.Join(t.TempDir(), "bench.pprof")
	tableArgs := slices.Concat(args[:len(args)-1], []string{"--timeline", "--timeline-interval", "5ms", "--progress", "1s",
		"--cpuprofile", profile})
	table := mustCLI(t, nil, tableArgs...)
	if !strings.Contains(table.stdout, "\ntimeline, every ") || !strings.Contains(table.stderr, "bench: 20/20 requests (100.0%)") ||
		strings.Contains(table.stderr, "\r") {
		t.Fatalf("table run: %v", table)
	}
	if b, err := os.ReadFile(profile); err != nil || len(b) < 100 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("--cpuprofile wrote %d bytes (%v), want a gzipped profile", len(b), err)
	}
}

// TestBenchRunsTheSyntheticWorkloadReproducibly: the synthetic workload
// replays against a real cluster with verified reads, and the same seed gives
// the same requests (so the same ideal hit ratio and chunk count).
func TestBenchRunsTheSyntheticWorkloadReproducibly(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t)
	run := func(seed string) loadtest.Report {
		t.Helper()
		r := mustCLI(t, nil, "bench", "--addr", nodes[0].grpc, "--workload", "synthetic", "--seed", seed,
			"--max-requests", "40", "--speedup", "-1", "--engines", "2", "--system-prompts", "3", "--namespace", "e2e/synthetic-"+seed,
			"--json", "--timeout", benchCallTimeout)
		var rep loadtest.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("bench --json printed no report: %v: %v", err, r)
		}
		if rep.Workload != "synthetic seed="+seed || rep.RequestsDone != 40 || rep.Corrupt != 0 || rep.Failed != 0 {
			t.Fatalf("report: %+v", rep)
		}
		return rep
	}
	a, b := run("7"), run("7")
	if a.Chunks != b.Chunks || a.IdealChunkHitRatio != b.IdealChunkHitRatio || a.IdealChunkHitRatio <= 0 {
		t.Fatalf("seed 7 twice: %d/%v and %d/%v chunks/ideal", a.Chunks, a.IdealChunkHitRatio, b.Chunks, b.IdealChunkHitRatio)
	}
	// The second run found what the first stored.
	if b.ChunkHitRatio != 1 {
		t.Fatalf("second run of the same seed: hit ratio %v, want 1", b.ChunkHitRatio)
	}
	if c := run("8"); c.Chunks == a.Chunks && c.IdealChunkHitRatio == a.IdealChunkHitRatio {
		t.Fatalf("seeds 7 and 8 gave the same workload")
	}
}

func TestBenchRejectsBadFlagsInOneLine(t *testing.T) {
	t.Parallel()
	checkOneLineFailure(t, runCLI(t, nil, "bench", "--engines", "0"), "--engines must be positive")
	checkOneLineFailure(t, runCLI(t, nil, "bench", "--timeline-interval", "0s"), "--timeline-interval must be positive")
	r := runCLI(t, nil, "bench", "--trace", filepath.Join(t.TempDir(), "none.jsonl"))
	checkOneLineFailure(t, r, "cannot read trace")
	if strings.Contains(r.stderr, "connect") {
		t.Fatalf("the trace is read before connecting: %v", r)
	}
}

func TestBenchProgressIsABarOnATerminalAndLinesElsewhere(t *testing.T) {
	t.Parallel()
	p := loadtest.Progress{Done: 5, Total: 10, Elapsed: 3 * time.Second, ChunkHitRatio: 0.5, Errors: 3, FailedChunks: 7}

	var lines bytes.Buffer
	lp := newBenchProgress(&lines, false, 10)
	lp.update(p)
	lp.update(p)
	lp.finish()
	want := "bench: 5/10 requests (50.0%) in 3s, about 3s left, chunk hit ratio 0.500, 3 failed calls, 7 failed chunks\n"
	if lines.String() != want+want {
		t.Fatalf("lines:\n%q\nwant twice:\n%q", lines.String(), want)
	}

	var bar bytes.Buffer
	bp := newBenchProgress(&bar, true, 10)
	bp.update(p)
	for _, w := range []string{"\r", "5/10", "hit 0.500, 3 errors", "req/s"} {
		if !strings.Contains(bar.String(), w) {
			t.Errorf("bar lacks %q: %q", w, bar.String())
		}
	}
	bp.update(loadtest.Progress{Done: 10, Total: 10})
	bp.finish()
	if out := bar.String(); !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 || !strings.Contains(out, "10/10") {
		t.Fatalf("a finished bar ends its one line: %q", out)
	}
}

// TestBenchWithCoalescedPeerLookupsReadsEverythingBack: with
// --coalesce-peer-lookups on every node, lookups that share peer calls still
// answer exactly: a replay by 4 engines stores with no failure and no
// corrupt or missing read, the same replay again finds every chunk, and the
// nodes export the count of merged requests.
func TestBenchWithCoalescedPeerLookupsReadsEverythingBack(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, "--coalesce-peer-lookups")
	tracePath := filepath.Join("..", "..", "loadtest", "trace", "testdata", "synthetic_trace.jsonl")
	args := []string{"bench", "--addr", nodes[0].grpc, "--trace", tracePath, "--max-requests", "30",
		"--speedup", "-1", "--engines", "4", "--namespace", "e2e/coalesced", "--json", "--timeout", benchCallTimeout}
	run := func() loadtest.Report {
		t.Helper()
		r := mustCLI(t, nil, args...)
		var rep loadtest.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("bench --json printed no report: %v: %v", err, r)
		}
		if rep.RequestsDone != 30 || rep.Corrupt != 0 || rep.Failed != 0 || rep.MissingAfterAck != 0 || rep.GetMisses != 0 {
			t.Fatalf("report: %+v", rep)
		}
		return rep
	}
	if first := run(); first.Stored == 0 {
		t.Fatalf("first run stored nothing: %+v", first)
	}
	if second := run(); second.ChunkHitRatio != 1 || second.Stored != 0 {
		t.Fatalf("second run: hit ratio %v, stored %d", second.ChunkHitRatio, second.Stored)
	}
	var merged float64
	for _, n := range nodes {
		v, ok := metricValue(t, n, "kvring_peer_has_coalesced_total")
		if !ok {
			t.Fatalf("node %s exports no kvring_peer_has_coalesced_total", n.id)
		}
		merged += v
	}
	t.Logf("%v lookups' Has requests shared a peer call", merged) // how many depends on timing: not asserted
}

// TestABenchRerunStartsColdInANamespaceOfItsOwn: without --namespace every
// run writes into a new namespace, named on stderr and in the report, so a
// rerun's hit ratio is the ideal's again instead of 1 (the last run's
// chunks); stderr says what the run replays, the progress lines estimate
// the time left, and --help says how long the default run takes and how to
// shorten it.
func TestABenchRerunStartsColdInANamespaceOfItsOwn(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0")
	tracePath := filepath.Join("..", "..", "loadtest", "trace", "testdata", "synthetic_trace.jsonl")
	run := func() (loadtest.Report, string) {
		t.Helper()
		r := mustCLI(t, nil, "bench", "--addr", n.grpc, "--trace", tracePath, "--max-requests", "20", "--speedup", "-1",
			"--engines", "2", "--progress", "1ms", "--json")
		var rep loadtest.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("bench --json printed no report: %v: %v", err, r)
		}
		if rep.RequestsDone != 20 || rep.Stored == 0 || rep.ChunkHitRatio != rep.IdealChunkHitRatio ||
			!strings.HasPrefix(rep.Namespace, "kvring-bench-") {
			t.Fatalf("a run: stored %d, hit ratio %v, ideal %v, namespace %q; want a cold run into a namespace of its own",
				rep.Stored, rep.ChunkHitRatio, rep.IdealChunkHitRatio, rep.Namespace)
		}
		if !strings.Contains(r.stderr, "bench: namespace "+rep.Namespace+", new for this run") ||
			!strings.Contains(r.stderr, "bench: 20 requests with 2 engines") {
			t.Fatalf("stderr does not say which namespace and what the run replays: %s", r.stderr)
		}
		return rep, r.stderr
	}
	first, _ := run()
	second, stderr := run()
	if second.Namespace == first.Namespace {
		t.Fatalf("two runs used namespace %s", first.Namespace)
	}
	if !strings.Contains(stderr, " left, chunk hit ratio") {
		t.Logf("no progress line came before the end (a fast run): %s", stderr)
	}
	help := mustCLI(t, nil, "bench", "--help").stdout
	for _, want := range []string{"takes 4 to 5 minutes", "shorten it", "namespace of its own"} {
		if !strings.Contains(help, want) {
			t.Errorf("bench --help does not say %q:\n%s", want, help)
		}
	}
}
