// Package olricbench compares kvring with Olric (github.com/buraksezer/olric
// v0.5.7), the Go distributed cache on kvring's own stack (memberlist and
// buraksezer/consistent): an embedded three-node Olric cluster in one process
// (Cluster), a loadtest.Backend over Olric's cluster client (Backend), an
// in-process three-node kvring cluster (KvringCluster) and a per-call put/get
// comparison of the two (Compare), run by cmd/olriccompare and by
// BenchmarkPerCall; cmd/percall prints the CPU time and page faults per call
// of each phase.
//
// It is a Go module of its own, so that Olric and its dependency tree stay
// out of kvring's go.mod and binaries; a replace directive points it at the
// repository's main module. `go test ./...` at the repository root does not
// enter it. Run it from this directory:
//
//	cd loadtest/olricbench
//	go test -count=1 ./...                      # the backend and cluster tests
//	go run ./cmd/olriccompare                   # the comparison, ratios printed
//	go test -run '^$' -bench PerCall -benchtime 200x
//	go run ./cmd/percall [-size 262144] [-olric]  # per-call CPU, phase by phase
//
// Olric keeps values in the tables of its kvstore engine, 1 MiB each by
// default, and refuses a value that does not fit in one table
// (storage.ErrEntryTooLarge): Cluster sets the engine's tableSize (default
// 4 MiB) so 2 MiB values are accepted.
package olricbench
