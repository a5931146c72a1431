package main

import (
	"os"
	"testing"

	"github.com/kvring/kvring/internal/testutil"
)

// TestMain runs the tests in a scratch directory (testutil.Scratch): the
// kvring binaries they build, the nodes' data and segment directories and
// every t.TempDir go there, and are removed even when the test binary is
// killed. It also lets the test binary double as the plain gRPC sink that
// the cluster benchmarks compare against (bench_e2e_test.go): re-executed
// with benchSinkEnv set, it serves the sink instead of running tests.
func TestMain(m *testing.M) {
	if os.Getenv(benchSinkEnv) != "" {
		os.Exit(benchSinkMain())
	}
	s := testutil.NewScratch()
	s.Exit(m.Run())
}
