package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/loadtest"
)

// TestBenchNeedsNoFilesAroundIt: run from an empty directory, as in a container image or a Kubernetes Job,
// `kvring bench` without --trace replays the built-in Mooncake trace against a real node with verified reads.
func TestBenchNeedsNoFilesAroundIt(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0")
	bin := kvringBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "--addr", n.grpc, "--max-requests", "10", "--speedup", "-1",
		"--engines", "1", "--json", "--timeout", benchCallTimeout)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := testutil.Run(cmd); err != nil {
		t.Fatalf("kvring bench from an empty directory: %v\nstderr: %s", err, stderr.String())
	}
	var rep loadtest.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("bench printed no report: %v: %s", err, stdout.String())
	}
	if rep.Workload != "mooncake" || rep.RequestsDone != 10 || rep.Stored == 0 || rep.Failed != 0 || rep.Corrupt != 0 {
		t.Fatalf("report: %+v", rep)
	}
}
