// Package clustertest runs kvring nodes in one test process: a Network
// between them that can cut, hang, delay and drop the links of a pair of
// nodes (network.go), a Cluster that holds the ring view every node reads
// and swaps it the way membership does (cluster.go), and core nodes — a
// store, a namespace registry, an owner and a coordinator served over gRPC
// on 127.0.0.1, wired by node/internal/services as a node's Start wires
// them — for the tests of the packages below the node (core.go). The node package's own cluster helper starts full nodes on the
// same Network and Cluster.
//
// Faults act on the connections a node dials to its peers (the Network's
// dial option): engines' connections in tests go straight to the node.
// Every fault is set and healed by the test; none is timed, and nothing
// here sleeps to synchronise: a hung link holds its bytes until it is
// healed or the connection closes. Servers listen on ports the kernel
// picks; everything started is stopped by the test's cleanup. No state is
// kept at package level.
package clustertest
