// Package placement simulates where kvring would put a trace's chunks and whom a lookup would ask, under
// candidate placement schemes, on the real consistent-hash ring (package ring).
//
// It owns three things: turning a trace into a [Workload] (prompts as ordered lists of chunks, each chunk
// interned to a dense index with the ring partition of its id), the [Scheme] descriptions (how chunks are
// grouped under one placement key, how a lookup walks the groups, which groups are spread over several
// owners), and the replay that measures a scheme on a [Cluster] (see [Simulate] and [Result] for the exact
// metric definitions).
//
// # Replay model
//
// Requests are replayed in trace order against an unbounded cache: a chunk is held from the moment the first
// request containing it is replayed. Each request first looks up its prompt (the held prefix is the longest
// run of leading chunks already held), then stores every chunk it has. A chunk is stored on the owners of its
// group's placement key: the group key is the id of the group's first chunk, the owner is the key's ring
// primary (or each of its first h ring owners when the scheme spreads the group). Chunk ids are chained
// prefix hashes, so a chunk's position, group and group key are functions of the chunk alone.
//
// The package does no I/O beyond the trace readers ([MooncakeFile], [TextPromptsFile]), reads no clock and
// keeps no package-level state; randomness is seeded. Values are not safe for concurrent mutation; distinct
// Simulate calls may run concurrently on shared Workloads and Clusters, which they only read.
package placement
