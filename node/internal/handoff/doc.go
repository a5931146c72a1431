// Package handoff moves chunks to the nodes that should hold them: after a
// ring change (a node joined, left or died), while this node drains, and
// after writes went to a substitute because an owner was unreachable. One
// Mover per node compares what the store holds with where the ring places
// it and, per chunk:
//
//   - this node is no longer among its owners (a join moved its partition,
//     this node drains, or it held the chunk in place of an unreachable
//     owner): copy it to every owner that lacks it, then evict it here
//     once every owner holds it (hand-off and hand-back);
//   - this node is an owner and the namespace keeps R ≥ 2 replicas: copy it
//     to the other owners that lack it (re-replication after a loss).
//
// Copies are the coordinator's two-phase writes (Peers.Copy, a
// chunkcopy.Func: coord.Copy in a node): a chunk counts
// as held by its new owner only once sealed there. Bytes are paced to
// Config.Rate. While this node holds chunks that belong elsewhere it gossips
// "handing off" so every node's reads also ask non-owners.
//
// It owns its one goroutine (Start, Close waits for it) and the pass
// statistics. It must not decide ring membership (membership does) or
// place new writes (the coordinator does).
package handoff
