// Package node runs one kvring node: it owns the node's lifecycle and its
// configuration, and it wires the parts that do the work, each constructed
// with explicit dependencies (docs/architecture.md, "Layers", draws them):
//
//   - node/membership: gossip membership and the ring built from it;
//   - node/internal/services: the one wiring of the namespace registry
//     (node/internal/namespace), the owner (node/internal/owner, the Peer
//     service), the coordinator (node/internal/coord, the Cache service),
//     hot-group spreading (node/internal/spread) and the gRPC server; Start
//     and both in-process test clusters (this package's and clustertest's)
//     call services.New;
//   - node/internal/security: TLS, tokens, the cluster key and the
//     interceptors that check them;
//   - node/internal/admin: the admin HTTP API and the views it serves;
//   - node/internal/resp with its adapter node/internal/resp/respcoord: the
//     Redis-protocol port (Config.RESP);
//   - node/internal/localsock with its adapter
//     node/internal/localsock/sockcoord: the local Unix socket
//     (Config.Socket; Vineyard IPC and kvring's extensions, served in
//     process by the coordinator);
//   - node/internal/handoff: the mover, which copies chunks to their owners
//     after ring changes and drains (Leave);
//   - node/internal/metrics: the instruments they update, and
//     node/internal/collectors: what is read from the parts at scrape time.
//
// The root's files, each one job:
//
//   - node.go: Node, Start (store, listeners, credentials, wiring, socket,
//     Redis port, admin API, gossip, in that order), Close and the getters;
//   - config.go, config_conns.go, config_limits.go: Config, its defaults
//     and validate;
//   - services.go: Config as services.Config (servicesConfig);
//   - security.go: SecurityConfig (security.Config), reading the
//     credentials at Start (secure) and Reload;
//   - resp.go: RESPConfig, opening the Redis-protocol port and its adapter;
//   - socket.go: SocketConfig, opening the local socket and its adapter;
//   - admin.go: making the admin API, the Node methods that read its views
//     (Cluster, RingInfo, Namespaces, Readiness, DropNamespace) and the
//     aliases of their types;
//   - handoff.go: Handoff and Leave (drain before stopping);
//   - disk.go: opening and closing the disk tier;
//   - metrics.go: registering the node's metrics (the instruments of
//     node/internal/metrics, the scrape-time collectors of
//     node/internal/collectors) and serving them.
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
//     drop a namespace, evict: node/internal/admin) need the admin token
//     or Config.AdminActions. Readiness is off while the node drains or its
//     store is unhealthy (Readiness).
//
// This package does not hold chunk bytes itself: the store does, and the
// owner and the coordinator move them.
package node
