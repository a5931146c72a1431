// Package respcoord is the Redis-protocol port's adapter over the
// coordinator: Cluster implements resp.Cluster with calls to
// coord.Coordinator in process. It owns the decisions the port needs of the
// cluster that are not protocol:
//
//   - the namespace of each Redis namespace name, registered on first
//     write, and a cache of the resp.Namespace of each record (nsCache);
//   - the Redis Cluster slot table, built from the ring, the members'
//     Redis-protocol addresses and who drains (buildSlotTable), and each
//     slot's placement key (slotPlaceKey, cached by slotPlaces);
//   - the kept-value decision (Kept: a write that would change nothing);
//   - EXISTS lookups with their lease pins (Held), reads gathered into one
//     buffer per key (getSink), removals, FLUSHDB, and SCAN's cursors over
//     the members' key listings;
//   - AUTH against the node's Credentials (engine tokens, admin token);
//   - where a key lives (Locate, for the admin API's /v1/resp/locate).
//
// # Why a package of its own, not package resp
//
// Package resp speaks the protocol and reaches the cluster only through its
// Cluster interface: it does not link the coordinator (nor, through it,
// gRPC), and its tests run against fakes. Putting this adapter into resp
// would make the protocol package depend on the coordinator and everything
// below it. So the adapter sits beside resp, imports both, and the node
// constructs it (New) with explicit dependencies: coordinator, registry,
// store, membership view, credentials, metrics, logger.
//
// # What it must not do
//
//   - Parse or write the protocol (resp does), or own goroutines beyond a
//     call's: Held runs its lookups on goroutines it waits for.
//   - Import gRPC, its codes or its status: the coordinator returns domain
//     errors (transfer.Err*), which resp maps to Redis error replies.
//   - Hold chunk bytes past a call: a read's buffer is handed to the port.
//
// Cluster is safe for concurrent use.
package respcoord
