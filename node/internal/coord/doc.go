// Package coord is the coordinator every node runs for engines: the Cache
// gRPC service. It places each chunk of a call on its owners (package ring),
// runs two-phase confirmed writes (put.go: a putTx with one method per phase,
// share.go: each owner's share and the fan-out of frames), fans lookups out
// (lookup.go), reads with owner fallback (get.go, fetch.go), registers
// namespaces cluster-wide (namespaces.go) and logs peer outages once
// (failures.go). Publish (publish.go) is a put whose bytes are already in
// this node's shared memory (the local socket's blobs): the same phases,
// with this node's share staged in the blobs' slots.
//
// # What it owns
//
//   - The connections to peers (peers.go), made on first use, closed when a
//     peer leaves the ring (RingChanged) and on Close.
//   - Goroutines within a call: one per owner while a phase fans out, all
//     waited for before the call returns. The one exception is a put's
//     receiver of the engine's frames (idle.go): a put abandoned for
//     idleness returns without it, it ends when gRPC cancels the stream, and
//     Close waits for it.
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
// (a publish's blobs, lent by the caller for the call, are read and handed
// to the owner as slots; nothing else of the store is touched).
package coord
