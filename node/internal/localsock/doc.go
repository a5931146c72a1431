// Package localsock serves a node's local Unix socket: the Vineyard IPC
// protocol (so a stock Vineyard client puts and gets blobs in the node's
// shared memory) and kvring's extension messages (publish sealed blobs as
// cluster chunks, look chunks up, get chunks as blobs). docs/vineyard.md is
// the protocol's reference, message by message.
//
// # What it owns
//
//   - The socket file: created with Config.Mode, a stale file left by a
//     crashed process replaced, a live one (something answers on it) an
//     error naming the path, removed by Close.
//   - One goroutine per connection, reading one request and writing its
//     reply in turn, and the accept loop; Close ends them all and waits.
//   - The object table of the Vineyard protocol: blobs (each a store.Blob,
//     or a store.View of a chunk this node holds, lent), metadata trees, names,
//     and per connection the references it holds, the unsealed blobs it
//     created and the segments whose descriptors it has been sent.
//     A connection that goes away frees its unsealed blobs and releases its
//     references; a deleted blob's slot is freed when its last reference
//     ends. Blob bytes count against the store's memory limit.
//
// # What it must not do
//
//   - Hold chunk bytes outside the store, or decide placement: publish, lookup
//     and get of cluster chunks go through the Cluster interface, which the
//     node implements with its coordinator (the same two-phase write and
//     reads as a gRPC client gets; a published blob's slot becomes the chunk
//     where this node owns it). Only chunks this node holds are handed out
//     by the server itself, in place (store.Lend).
//   - Trust the peer: every request is bounded (256 MiB per message, typed
//     fields, ids as exact unsigned integers), answered with an error reply
//     naming the problem, and never crashes or stalls the node; a client
//     that does not read its replies is disconnected after
//     Config.WriteTimeout.
//   - Parse flags or environment variables (cmd/kvring does).
//
// All methods of Server are safe for concurrent use.
package localsock
