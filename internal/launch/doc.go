// Package launch starts real `kvring serve` processes for tests and tools:
// the e2e tests of cmd/kvring, the loadtest programs and, through
// cmd/kvnodes, the loadtest shell scripts and the Python suite
// (python/tests/cluster.py, one kvnodes per node). It is the one place that knows
// how a node is started on loopback, how its addresses are learned, when it
// counts as ready and how it is stopped and cleaned up.
//
// A node's addresses default to 127.0.0.1:0: the launcher asks the kernel
// for a free port and holds it (HoldPort: bound, not listening) until the
// node listens on it, so no other launch, test or outgoing connection takes
// it in between; a node that still finds a port taken (the UDP side of its
// gossip port) is started again on others. The node counts as ready once
// its admin /readyz answers 200 and, unless its log level hides it, it has
// logged "node ready" (text or JSON logs), whose addresses and id the
// launcher records. Every process is started with StartProcess
// (SysProcAttr.Pdeathsig = SIGKILL, from one thread that lives as long as
// the process) in a process group of its own, so a node dies with whatever
// started it, however that ends. A node that stopped keeps its ports held
// until it is restarted on them or closed, so nobody else takes them in
// between.
//
// StartNode starts one node on directories the caller owns; Start starts a
// cluster of N nodes that join the first, on directories it makes and
// removes on Close (data and socket under Config.Dir, segments under
// Config.ShmRoot). It lives under internal/ because only this module's
// tests and tools start nodes this way; a deployment runs `kvring serve`
// itself.
package launch
