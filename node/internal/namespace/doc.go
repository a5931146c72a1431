// Package namespace owns the namespaces a node knows: the registry (name →
// record), the schema fingerprint and the diff a mismatched client is shown,
// the rules of registration (first registration wins cluster-wide, later
// clients must match), and the merge of records learned from peers.
//
// It does no I/O of its own and starts no goroutines: the cluster-wide steps
// of a registration (offering a record to every member, learning records from
// a peer) are functions the caller passes in (Broadcast, Lister), which is
// where network calls and their bounds live. Records live in memory and,
// through the Catalog the node passes (its store), on disk: Restore takes
// them back after a restart.
//
// It must not hold chunk bytes or know the ring.
package namespace
