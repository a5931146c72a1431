// Package node runs one kvring node: it owns the node's lifecycle, its
// configuration, its admin API and the registration of its metrics, and it
// wires the parts that do the work:
//
//   - node/membership: gossip membership and the ring built from it;
//   - node/internal/owner: the Peer service, this node as the owner of chunks;
//   - node/internal/coord: the Cache service, this node as a coordinator;
//   - node/internal/namespace: the namespace registry;
//   - node/internal/localsock: the local Unix socket (Config.Socket; Vineyard
//     IPC and kvring's extensions, served in process by the coordinator:
//     publish, lookups, registration; a get of chunks held elsewhere through
//     this node's own coordinator: node/internal/localsock/sockcoord);
//   - node/internal/handoff: the mover, which copies chunks to their owners
//     after ring changes and drains (Leave);
//   - node/internal/spread: hot-group spreading (the lookup counter, the
//     spread records, the spreader that copies hot groups to their spread
//     sets, load hints);
//   - node/internal/metrics: the instruments they update.
//
// newServices (services.go) is the one place owner, coordinator and registry
// are wired around a store and a ring view; Start and the in-process test
// cluster both use it.
//
// # Contract
//
//   - New validates the configuration (filling defaults, the store's too)
//     and does no I/O.
//   - Start opens the store, the listeners, the services, the admin server
//     and gossip, in that order, and logs each start-up phase with its
//     duration. The parts are published once, together, and never replaced:
//     getters and the admin API read them without waiting for Start or Close.
//     If any step fails, what was opened is closed again and the error names
//     the step.
//   - Leave (before Close, on SIGTERM) drains: the node gossips draining and
//     hands every chunk it holds to the chunks' next owners, within the
//     context's deadline.
//   - Close is idempotent. It marks the node not ready, stops the hand-off,
//     leaves the cluster,
//     stops the listeners (letting in-flight requests finish within the
//     context's deadline), closes the peer connections and the store (so its
//     catalog is written), and waits for every goroutine the node started.
//     Errors are joined.
//   - One clock (Config.Now) drives the store's leases, the lease records of
//     owner and coordinator and the membership's settle window.
//   - The admin API reads by default; its write actions (drain, forget,
//     drop a namespace, evict: actions.go) need the admin token or
//     Config.AdminActions. Readiness is off while the node drains or its
//     store is unhealthy (Readiness).
//
// This package does not hold chunk bytes itself: the store does, and the
// owner and the coordinator move them.
package node
