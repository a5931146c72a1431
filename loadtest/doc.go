// Package loadtest replays LLM-serving traffic against a KV-cache backend and
// reports hit ratio, throughput, latency and the honesty of the answers.
//
// A Runner simulates E inference engines, each with its own Backend (for
// kvring, its own SDK client, or with Socket its own connection to a node's
// local socket). Workload 1 replays a Mooncake trace (see
// loadtest/trace): each 512-token block is split into chunks of ChunkTokens
// tokens whose ids are derived from the block id (BlockChunkIDs) and whose
// bytes are derived from the chunk id (ChunkBytes), so every byte read back is
// verified. Per request an engine looks up its ordered chunk ids, gets the held
// prefix and puts the rest.
//
// The package does no I/O of its own beyond calling the Backend; flags, output
// files and progress display belong to the caller (cmd/kvring bench).
//
// The programs and scripts beside it start real `kvring serve` processes in
// one way, internal/launch (free ports held until the node listens, its own
// data, socket and shm directories, ready on /readyz, stopped with whatever
// started it, directories removed): neighbour, respidle and restart call it
// directly; netfault runs its nodes, inside network namespaces on fixed
// addresses, as launch processes; the shell scripts start them through
// internal/launch/cmd/kvnodes, wrapped by nodes.sh (start_nodes, nodes_ctl
// to stop, kill, pause or restart one) and cluster.sh (start_cluster), as
// the Python suite (python/tests/cluster.py) and python/bench do.
// olricbench runs kvring nodes in process (node.New), not as processes.
package loadtest
