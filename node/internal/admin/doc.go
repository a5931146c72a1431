// Package admin is a node's admin HTTP API (docs/operations.md lists its
// endpoints): Handler serves /metrics, /healthz, /readyz, the read-only
// views under /v1/ (stats, cluster, version, handoff, ring, namespaces and
// their shares, where a Redis-protocol key lives) and the write actions
// (drain, undrain, forget a member, drop a namespace, set a namespace's
// share, evict a chunk: actions.go), behind the admin token when one is
// configured (auth.go), and /debug/pprof/ when enabled.
//
// # What it owns
//
//   - The views' types (ClusterInfo, RingInfo, NamespaceInfo, Readiness,
//     Stats, ...), with their JSON names: the kvring CLI decodes them
//     through node's aliases.
//   - The write actions' rules: who may call them (the admin token, or
//     Config.AdminActions), one log line and one count
//     (kvring_admin_actions_total) per call, the refusals' HTTP statuses.
//   - JSON errors for every path, unknown ones included (jsonNoRoute).
//
// # What it must not do
//
//   - Own the node's lifecycle or its listeners: node makes the API once
//     every part is open (New, with explicit parts) and serves Handler on
//     the admin listener it opened; API holds no goroutines.
//   - Wait for the node's lifecycle lock: every view and handler answers
//     while Close drains requests.
//   - Keep a token in clear: it compares SHA-256 digests the node's
//     security.Credentials hold.
//
// API is safe for concurrent use.
package admin
