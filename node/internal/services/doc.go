// Package services wires what a node serves over gRPC around one store and
// one ring view: the namespace registry, the owner (the Peer service), the
// coordinator (the Cache service), hot-group spreading (its table, counter,
// meter and spreader) and the gRPC server both services are registered on,
// with its limits, the security interceptors and the interceptors that
// name each Cache call's client (clientNamer).
//
// New is the one place these parts are wired: the node's Start and both
// in-process test clusters (node's own, and clustertest's core nodes) call
// it, so a test cluster runs the wiring a real node runs.
//
// # What it owns
//
//   - The gRPC server's listener wrapper (connWatch): it counts
//     connections, frees what a closed connection's peer staged
//     (owner.ConnClosed), and reports each client whose last connection
//     closed (clientConns, after ClientGoneGrace) to the coordinator, which
//     ends its lookup leases. clientConns's grace timers are its own:
//     Release (or Close) stops them and waits for any that fired.
//   - Restoring the namespace records the store's catalog kept
//     (RestoreNamespaces) and enforcing the memory share a record carries
//     (enforceShare).
//
// # What it must not do
//
//   - Open listeners, start goroutines of its own beyond the grace timers,
//     or read flags: the caller serves the server (Serve) on a listener it
//     opened, starts and stops the spreader's loop, and drains the server
//     before Release.
//   - Fill defaults: Config carries the values the node validated
//     (node.Config), or a test cluster's own.
//   - Hold chunk bytes: the store holds them; owner and coordinator move
//     them.
//
// Services's methods are safe for concurrent use.
package services
