// Package membership runs a node's gossip membership (hashicorp/memberlist)
// and keeps the ring (package ring) built from it.
//
// # What it owns
//
//   - Two or three goroutines of its own per Membership (besides
//     memberlist's), started by Start and waited for by Close: the ring
//     goroutine, which applies membership events and rebuilds the ring; the
//     reach check (reach.go), which pings a member whose direct ping failed
//     again before marking it unreachable from this node; and, when
//     Config.Join names seeds, the rejoin loop, which joins them again so a
//     split cluster heals.
//   - The gossip sockets (TCP and UDP) memberlist binds.
//   - The member table (who is alive, dead or left, and each member's own
//     state) and the node metadata this node gossips (meta.go: id, gRPC and
//     admin addresses, state, boot time, ring fingerprint, build, supported versions).
//   - Which members gossip may hold down before they are declared dead
//     (suspect.go: this node's failed probes, read from memberlist's log
//     lines and its ping delegate, since memberlist exports no suspicion),
//     and which it cannot reach directly while others still do (reach.go).
//
// # Contract
//
//   - New validates and does no I/O; Start binds, joins and starts the
//     goroutines; Close stops its goroutines and waits for them, then
//     announces Leaving, leaves and shuts gossip down.
//   - memberlist's callbacks (delegate.go) never block: they copy what they keep
//     and hand it to the ring goroutine.
//   - Ring and Suspect never block; Ring never returns nil. A ring is rebuilt only when its
//     member list changes; each rebuild gets the next epoch (local to the node).
//   - Peers whose ring settings differ, or that have no version in common with
//     this node for a versioned part (versions.go: placement, wire), are
//     refused, and each refusal is logged once, naming both builds.
//   - The ring is built with the highest placement version every alive
//     member supports (Membership.Active); when that changes, the ring is
//     rebuilt like on any membership change, and the node's hand-off moves
//     the chunks.
//   - Time (the settle window, member timestamps) comes from Config.Now.
//
// # What it must not do
//
// It holds no chunk bytes, makes no gRPC calls and knows nothing of stores,
// namespaces or the coordinator: the node wires OnRingChange to them.
package membership
