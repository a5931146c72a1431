package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary double as the plain gRPC sink that the
// cluster benchmarks compare against (bench_e2e_test.go): re-executed with
// benchSinkEnv set, it serves the sink instead of running tests.
func TestMain(m *testing.M) {
	if os.Getenv(benchSinkEnv) != "" {
		os.Exit(benchSinkMain())
	}
	code := m.Run()
	benchCleanup()
	os.Exit(code)
}
