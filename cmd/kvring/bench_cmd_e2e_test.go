package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvring/kvring/loadtest"
)

func TestBenchReplaysATraceWithVerifiedReads(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t)
	tracePath := filepath.Join("..", "..", "loadtest", "trace", "testdata", "synthetic_trace.jsonl")
	args := []string{"bench", "--addr", nodes[0].grpc + "," + nodes[1].grpc,
		"--admin", nodes[0].admin + "," + nodes[1].admin + "," + nodes[2].admin,
		"--trace", tracePath, "--max-requests", "20", "--speedup", "-1", "--engines", "2", "--json"}
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
}

func TestBenchRejectsBadFlagsInOneLine(t *testing.T) {
	t.Parallel()
	checkOneLineFailure(t, runCLI(t, nil, "bench", "--engines", "0"), "--engines must be positive")
	r := runCLI(t, nil, "bench", "--trace", filepath.Join(t.TempDir(), "none.jsonl"))
	checkOneLineFailure(t, r, "cannot read trace")
	if strings.Contains(r.stderr, "connect") {
		t.Fatalf("the trace is read before connecting: %v", r)
	}
}
