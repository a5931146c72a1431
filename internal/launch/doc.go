// Package launch starts real `kvring serve` processes for tests and tools:
// the e2e tests of cmd/kvring, the loadtest programs and, through
// cmd/kvnodes, the loadtest shell scripts. It is the one place that knows
// how a node is started on loopback, how its addresses are learned, when it
// counts as ready and how it is stopped and cleaned up.
//
// A node listens on ports the kernel picks (127.0.0.1:0), so no two
// launches race for a port; the node logs the addresses it got in its
// "node ready" line (text or JSON logs), which the launcher reads, and the
// node counts as ready once its admin /readyz answers 200 as well. Every
// process is started with StartProcess (SysProcAttr.Pdeathsig = SIGKILL,
// from one thread that lives as long as the process) in a process group of
// its own, so a node dies with whatever started it, however that ends. A
// node that stopped keeps its ports held (HoldPort) until it is restarted
// on them or closed, so nobody else takes them in between; a restart that
// still finds a port taken is tried again until its ready timeout.
//
// StartNode starts one node on directories the caller owns; Start starts a
// cluster of N nodes that join the first, on directories it makes and
// removes on Close (data and socket under Config.Dir, segments under
// Config.ShmRoot). It lives under internal/ because only this module's
// tests and tools start nodes this way; a deployment runs `kvring serve`
// itself.
package launch
