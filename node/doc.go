// Package node runs one kvring node: it owns the node's lifecycle and every
// goroutine the node starts.
//
// # Contract
//
//   - New validates the configuration and does no I/O.
//   - Start opens the store and the listeners, in that order, and logs each
//     start-up phase with its duration. If any step fails, what was opened is
//     closed again and the error names the step.
//   - Close is idempotent. It marks the node not ready, stops the listeners
//     (letting in-flight requests finish within the context's deadline),
//     closes the store so its catalog is written, and waits for every
//     goroutine the node started. Errors are joined.
//
// The cluster (gossip membership, the ring, the coordinator and the gRPC
// services) builds on this lifecycle; this package does not hold chunk bytes
// itself: the store does.
package node
