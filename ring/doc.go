// Package ring decides placement: a chunk key (namespace, id) hashes to one of a fixed number of partitions,
// and each partition has an ordered list of owners among the ring's members.
//
// A Ring is an immutable snapshot built by New from a member list, an epoch and a Config. The caller (node/)
// builds a new Ring on every membership change and swaps it in atomically; this package keeps no state of its
// own, starts no goroutines, reads no clock and does no I/O.
//
// # Placement
//
//   - Partition(namespace, id) = xxHash64(len(namespace) ‖ namespace ‖ id) mod PartitionCount. It depends on
//     the Config only, never on the members, so a key keeps its partition across membership changes.
//   - Each member has VirtualNodes points on a 64-bit hash circle, derived from its ID alone (a splitmix64
//     sequence seeded with xxHash64 of the ID). Partition p sits at floor(p·2^64/PartitionCount): partitions
//     are evenly spaced, so a member's share follows the arcs its points cover.
//   - The primary owner of each partition is chosen by consistent hashing with bounded loads: in partition
//     order, the member of the first point clockwise from the partition whose member has room, where no
//     member is primary for more than max(ceil(P/M), floor(P·Load/M)) partitions. New computes it in one sorted
//     sweep (see place), not partition by partition.
//   - Further owners are the next distinct members met walking clockwise from the partition's point, so the
//     replicas of one member's partitions are spread over many members.
//   - The Python client (python/kvring/ring.py) computes the same placement; pyvectors_test.go writes the
//     vectors that hold the two together.
//
// # Invariants
//
//   - Deterministic: the same member IDs (in any order) and the same Config give the same placement on every
//     node. Addr never affects placement. Config.Fingerprint identifies the settings and the placement
//     version (Config.Placement); Config.SettingsFingerprint the operator's settings alone. Nodes refuse
//     peers whose settings fingerprint differs, and agree on a placement version among those they all
//     support (node/membership); this package only builds the version it is given.
//   - PlacementV3 exists to rehearse a change of algorithm: version 2 with other member points. No release
//     advertises it.
//   - Owners are distinct members of the ring, primary first; there are min(n, ReplicationFactor, Len()) of
//     them, and the first k are the same whatever n is asked for.
//   - Every partition has a primary when the ring has members; none has more than MaxLoad partitions.
//   - New never panics on its input: settings or member lists it cannot place (load <= 1, fewer than two
//     virtual nodes, more members than partitions, two members sharing a point, ...) are reported as errors
//     wrapping this package's sentinels.
//   - An empty member list is not an error (a node has no ring members before it joins): New returns an empty
//     Ring. Every partition of an empty ring has no owners: Owners and PartitionOwners return nil,
//     AppendOwners appends nothing and Primary returns ErrNoMembers.
//   - A Ring is safe for concurrent use. Lookups (Partition, Primary, AppendOwners) do not allocate; Owners
//     allocates only the slice it returns.
package ring
