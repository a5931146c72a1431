// Package moves is what the nodes of a cluster know of where chunks are
// while partitions move: each node's summary of the partitions in which it
// holds chunks that it does not own (gossiped in its memberlist metadata),
// and a reader's view of every member's summary, which names the members a
// read of a partition must ask besides the partition's owners.
//
// A node computes its summary against one ring (the ring its last hand-off
// pass planned on, named by RingHash): the partitions of every chunk it
// holds while it is none of their owners in that ring, and of every chunk it
// stages such a write of since. A reader whose ring is the summary's asks the
// node only about those partitions. A reader whose ring is newer, but who
// knows the summary's ring, asks the node also about the partitions it owned
// in that ring (it has not planned on the new ring yet, so it may hold their
// chunks still). A reader who does not know the summary's ring, or a node
// that gossips All (it has not planned yet and could not list its catalog)
// is asked about every partition: knowledge that is missing widens the reads
// of that member only, never narrows them. A node that started and has not
// planned yet gossips an AnyRing summary instead: every partition in which
// its catalog (and what it stored since) holds chunks, owned or not, which
// holds whatever ring a reader has, since a chunk's partition does not
// depend on the members.
//
// The package is pure: no goroutines, clocks or I/O. Summaries and views are
// immutable once built and safe for concurrent use.
package moves
