// Package collectors holds the node's Prometheus collectors that read its
// parts at scrape time: the store's accounting and reasons (store.go), the
// namespaces' usage (namespaces.go), the cluster as this node sees it and
// the count of unreachable peers (node.go), the disk tier (disk.go), the
// hand-off summaries (moves.go) and hot-group spreading (spread.go), plus
// the build and active-version gauges. The instruments the parts update
// themselves are node/internal/metrics's.
//
// # What it must not do
//
//   - Register anything: the node registers what these return with its
//     Registerer (and unregisters it on Close), so many nodes can run in
//     one process.
//   - Block a scrape: every collector reads snapshots or counters that
//     take at most a short lock.
//   - Change what it reads: collectors only read.
package collectors
