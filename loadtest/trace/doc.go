// Package trace reads LLM-serving request traces in the Mooncake JSONL format and
// computes the reference figures used to judge a cache replay: unbounded hit ratios,
// an LRU simulation and the offline optimum (Belady).
//
// A trace is a sequence of [Request] values in arrival order. Each request names its
// input as an ordered list of block ids, one per [BlockTokens] tokens; an id is a
// chained prefix hash, so it already covers its block and every block before it, and
// two requests share their first k blocks exactly when their first k ids are equal.
//
// Replay rules, shared by every helper here: the blocks of all requests are visited
// in arrival order and, within a request, in prefix order; each visit is one access,
// and an access is a hit when the id is in the cache at that moment. Token-weighted
// figures weigh each block by its token count (see [Request.BlockTokenCount]).
//
// The package does no I/O beyond [ReadFile], reads no clock and keeps no
// package-level state other than the read-only trace behind [ReadBuiltinSynthetic]. Functions are safe for concurrent use on distinct or unshared
// arguments; the simulators ([LRU]) are not safe for concurrent use.
package trace
