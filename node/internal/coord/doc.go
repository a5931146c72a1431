// Package coord is the coordinator every node runs for engines: the Cache
// gRPC service. It places each chunk of a call on its owners (package ring),
// runs two-phase confirmed writes, fans lookups out (lookup.go), reads with
// owner fallback (get.go, fetch.go), registers namespaces cluster-wide
// (namespaces.go) and logs peer outages once (failures.go).
//
// Reads have one plain Go entry, Coordinator.GetChunks (getsink.go), which
// writes into a ChunkSink and reports a chunk no member could send as a
// MissError (not found, or unavailable); the Cache service's Get is its gRPC
// adapter (getstream.go), and the node's Redis-protocol port and local
// socket are sinks of their own.
//
// Every write is one writeTx (write.go): prepare, plan, a data phase,
// vote, commit, and the decision of each chunk's fate (result.go), with
// one session per owner (session.go: in process for this node, a
// Peer.Prepare stream for a peer) and each owner's share of the batch
// (share.go). Three writes differ only in their data phase (a dataPhase)
// and in where their chunks go: an engine's Put (put.go: bytes from the
// engine's stream, chunks placed on the ring with substitutes for
// unreachable owners), a Publish (publish.go: bytes already in this node's
// shared memory, the local socket's blobs, whose slots become this node's
// chunks) and a Copy (copy.go: chunks this node holds, read from its store,
// written to one member for the hand-off or as spread copies).
//
// # What it owns
//
//   - The connections to peers (peers.go), made on first use, closed when a
//     peer leaves the ring (RingChanged) and on Close.
//   - Goroutines within a call: one per owner while a phase fans out, and
//     one per write that cuts the sessions of owners gossip suspects
//     (suspect.go), all waited for before the call returns. The one
//     exception is a put's receiver of the engine's messages (idle.go: its
//     begin message and its frames): a put abandoned for idleness or a slow
//     stream returns without it, it ends when gRPC cancels the stream, and
//     Close waits for it (none starts once Close has begun).
//   - Who each call is for (package tenant): it passes the engine's name to
//     the owners in its Peer calls, so that each owner charges the engine's
//     share of its staged and pinned bytes, not the coordinator's.
//   - No chunk bytes beyond the frame in flight, and one chunk read from a
//     peer while its checksum is verified. This node's own chunks are read
//     and written through package owner, in process.
//
// # Contract
//
//   - A chunk is reported stored only when at least min_replicas owners
//     sealed it (or held it already); no holder means rejected or failed,
//     never success. Bytes that fail their checksum are never sent.
//   - Every status error it returns is built by transfer.ToStatus.
//   - Time (lease records, outage durations) comes from Config.Now.
//
// State it keeps across calls: the lookup-lease records, the peer
// connections, the runs of peer failures it logged, the members that left
// the ring lately (departed.go) and the queues of coalesced Has requests
// (coalesce.go). It must not decide membership or touch the store directly
// (a publish's blobs and a copy's views, lent by the caller for the call,
// are read, and the blobs handed to the owner as slots; nothing else of the
// store is touched).
package coord
