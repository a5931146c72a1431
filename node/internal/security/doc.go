// Package security holds a node's credentials and the checks made with
// them (docs/security.md): Config names the files, Load reads them into
// Credentials, Reload reads the reloadable ones again (SIGHUP).
//
// # What it owns
//
//   - TLS: the node certificate, presented on the gRPC port (and the
//     Redis-protocol port) and to peers, the cluster CA peers are verified
//     against, and the admin port's certificate (ServerTLS, PeerDialOptions,
//     AdminTLS).
//   - The cluster key: the HMAC every peer call carries (clusterKeyCreds)
//     and the Peer service checks.
//   - Engine bearer tokens (the tokens file, parseTokens) with the namespace
//     prefixes each allows, and the admin token (its SHA-256 only).
//   - The gRPC interceptors that authenticate calls: Peer calls only from
//     nodes (node certificate, cluster key), Cache calls with a token that
//     allows their namespace (ServerOptions).
//   - The gossip keyring as read from its file (GossipKeys).
//
// # What it must not do
//
//   - Open listeners or own goroutines: the node wraps its listeners with
//     the TLS configurations and registers the options on its server.
//   - Keep a secret in clear beyond what it must present: tokens are kept
//     as SHA-256 digests and compared in constant time; the cluster key
//     leaves the node only as an HMAC.
//   - Parse flags or environment variables (cmd/kvring does).
//
// Credentials is safe for concurrent use; none of its methods blocks on the
// network.
package security
