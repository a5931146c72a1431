package main

import (
	"github.com/spf13/pflag"

	"github.com/kvring/kvring/node"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/store"
)

// serve's flags. Each flag is bound to the field it sets (node.Config and
// its parts' configs, or serveOptions for the command's own settings), and
// its default is that field's value when it is registered: the default the
// package owning the setting gives (newServeOptions), written nowhere else.
// One register function per config: registerServeFlags calls them all.

// registerServeFlags adds every flag of serve to fs, bound to o.
func registerServeFlags(fs *pflag.FlagSet, o *serveOptions) {
	registerServeNode(fs, &o.node)
	registerServeMembership(fs, &o.node.Membership)
	registerServeStore(fs, &o.node.Store)
	registerServeGRPC(fs, &o.node)
	registerServeAdmin(fs, &o.node)
	registerServeSpread(fs, &o.node.Spread)
	registerServeSocket(fs, &o.node.Socket)
	registerServeSecurity(fs, &o.node.Security)
	registerServeRESP(fs, &o.node.RESP)
	registerServeDisk(fs, &o.node.Disk)
	registerServeLimits(fs, &o.node.Conns)
	fs.StringVar(&o.logFormat, "log-format", o.logFormat, "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", o.logLevel, "log level: debug, info, warn or error")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", o.drainTimeout, "on SIGTERM, how long the node hands its chunks to their next owners before it leaves (0: leave at once)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", o.shutdownTimeout, "on SIGTERM, how long the node waits for requests in flight after it left the cluster")
}

// registerServeNode adds the flags of the node's own settings.
func registerServeNode(fs *pflag.FlagSet, c *node.Config) {
	fs.StringVar(&c.GRPCAddr, "grpc-addr", c.GRPCAddr, "gRPC listen address for engines and peers")
	fs.StringVar(&c.AdvertiseGRPCAddr, "advertise-addr", c.AdvertiseGRPCAddr, "gRPC address peers reach this node at (default: the listener, with the gossip host)")
	fs.IntVar(&c.Replication, "replication", c.Replication, "replication factor of namespaces whose first client does not choose (at most 3)")
	fs.IntVar(&c.MinReplicas, "min-replicas", c.MinReplicas, "fewest holders for a write to count as stored, for such namespaces")
	fs.IntVar(&c.MaxBatchChunks, "max-batch", c.MaxBatchChunks, "most chunks one call may carry")
	fs.IntVar(&c.MaxNamespaces, "max-namespaces", c.MaxNamespaces, "most namespaces the cluster registers; one more is refused")
	fs.BoolVar(&c.CoalescePeerHas, "coalesce-peer-lookups", c.CoalescePeerHas, "merge concurrent lookups of the same owner into one peer call while one is in flight (fewer calls with many concurrent lookups, a wait with few)")
	fs.DurationVar(&c.PutIdleTimeout, "put-idle-timeout", c.PutIdleTimeout, "end a put whose engine sends nothing for this long, before its begin message or while its bytes are awaited, freeing what it staged (negative: no limit)")
	fs.IntVar(&c.PutMaxAwaitingBegin, "put-max-awaiting-begin", c.PutMaxAwaitingBegin, "most puts of one client the node waits on for their begin message at once; more wait their turn and fail with ResourceExhausted if none comes before their begin deadline (negative: no bound)")
	sizeVar(fs, &c.PutMinRate, "put-min-rate", "end a put whose chunk bytes arrive slower than this many bytes per second on average, once --put-idle-timeout has passed (e.g. 256KiB; 1 for practically no minimum)")
	sizeVar(fs, &c.HandoffRate, "handoff-rate", "most bytes per second the node copies to other nodes when it hands chunks off or re-replicates them (e.g. 256MiB; 0: no cap)")
	fs.DurationVar(&c.HandoffSweep, "handoff-sweep", c.HandoffSweep, "how often the node checks, unprompted, that its chunks are on their owners with enough replicas (negative: only after ring changes)")
}

// registerServeMembership adds the gossip flags.
func registerServeMembership(fs *pflag.FlagSet, c *membership.Config) {
	fs.StringVar(&c.GossipAddr, "gossip-addr", c.GossipAddr, "gossip (memberlist) listen address, TCP and UDP")
	fs.StringVar(&c.AdvertiseAddr, "gossip-advertise-addr", c.AdvertiseAddr, "gossip address peers reach this node at (default: derived)")
	fs.StringSliceVar(&c.Join, "join", c.Join, "gossip addresses of seed nodes to join, comma separated (retried until they answer)")
	fs.DurationVar(&c.RejoinInterval, "rejoin-interval", c.RejoinInterval, "how often the seeds are joined again so a split cluster heals")
	fs.DurationVar(&c.SettleWindow, "settle-window", c.SettleWindow, "after a ring change or this node's start, how long reads also ask members of earlier releases (no hand-off summary) about every chunk (negative: never)")
	t := &c.Timing
	fs.DurationVar(&t.ProbeInterval, "gossip-probe-interval", t.ProbeInterval, "how often each node probes another to detect failures")
	fs.DurationVar(&t.ProbeTimeout, "gossip-probe-timeout", t.ProbeTimeout, "how long a probe waits for its ack before asking others to probe (keep it under half of --gossip-probe-interval)")
	fs.IntVar(&t.SuspicionMult, "gossip-suspicion-mult", t.SuspicionMult, "a suspected node is declared dead after this many probe intervals (times log10 of the cluster size, at least 1) unless it refutes")
	fs.IntVar(&t.SuspicionMaxTimeoutMult, "gossip-suspicion-max-mult", t.SuspicionMaxTimeoutMult, "a suspicion that fewer than --gossip-suspicion-mult minus 2 other nodes confirm lasts at most this many suspicion timeouts")
}

// registerServeStore adds the flags of the local tier.
func registerServeStore(fs *pflag.FlagSet, c *store.Config) {
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory of the node's catalog (node identity, chunk catalog)")
	fs.StringVar(&c.ShmDir, "shm-dir", c.ShmDir, "directory of the shared-memory segment files")
	sizeVar(fs, &c.MemoryLimit, "memory-limit", "memory budget for chunk bytes (e.g. 1GiB, 512MiB)")
	if c.MaxChunkSize == 0 {
		c.MaxChunkSize = store.DefaultMaxChunkSize // shown as the default; serve caps it at the memory limit
	}
	sizeVar(fs, &c.MaxChunkSize, "max-chunk-size", "largest chunk accepted (at most the memory limit unless set)")
	fs.DurationVar(&c.StageLease, "stage-lease", c.StageLease, "how long a staged write waits for its commit")
	fs.BoolVar(&c.AllowShmOvercommit, "shm-overcommit", c.AllowShmOvercommit, "start even when the --shm-dir filesystem is smaller than --memory-limit (writes past its space are then rejected: no space)")
	sizeVar(fs, &c.MaxStagedBytes, "max-staged", "most chunk bytes writes in progress may reserve at once, so stalled writes cannot push out stored chunks (default: half the memory limit)")
	fs.DurationVar(&c.MaxPinHold, "max-pin-hold", c.MaxPinHold, "longest one client keeps one chunk pinned without a break by renewing lookup leases; past it the chunk is answered held but not pinned (default: twice the longest lease; negative: no bound)")
	sizeVar(fs, &c.MaxPinnedBytes, "max-pinned", "most chunk bytes lookup leases may pin at once (default: half the memory limit)")
	fs.StringVar(&c.Policy, "eviction-policy", c.Policy, "which chunks stay when memory is full: lru (least recently used goes first) or tinylfu (ristretto: frequency-based admission and eviction)")
}

// registerServeGRPC adds the gRPC server's connection limits.
func registerServeGRPC(fs *pflag.FlagSet, c *node.Config) {
	fs.IntVar(&c.MaxStreamsPerConn, "grpc-max-streams", c.MaxStreamsPerConn, "most calls one gRPC connection may have open at once; clients queue the rest")
	sizeVar(fs, &c.MaxRecvMsgBytes, "grpc-max-recv-msg-size", "largest gRPC message accepted (must hold a 1 MiB frame and a call of --max-batch chunks)")
	fs.DurationVar(&c.KeepaliveMinTime, "grpc-keepalive-min-time", c.KeepaliveMinTime, "clients pinging more often than this are disconnected (GOAWAY too_many_pings); at most 10s")
	fs.DurationVar(&c.KeepaliveTime, "grpc-keepalive-time", c.KeepaliveTime, "after this long without activity the server pings a client")
	fs.DurationVar(&c.KeepaliveTimeout, "grpc-keepalive-timeout", c.KeepaliveTimeout, "a client that does not answer a ping within this is disconnected")
	fs.DurationVar(&c.MaxConnIdle, "grpc-max-conn-idle", c.MaxConnIdle, "close gRPC connections without a call in flight for this long (negative: never)")
	fs.DurationVar(&c.MaxConnAge, "grpc-max-conn-age", c.MaxConnAge, "close gRPC connections this old, after --grpc-max-conn-age-grace (0: never)")
	fs.DurationVar(&c.MaxConnAgeGrace, "grpc-max-conn-age-grace", c.MaxConnAgeGrace, "how long calls in flight may finish on a connection closed for its age")
	fs.DurationVar(&c.ClientGoneGrace, "client-gone-grace", c.ClientGoneGrace, "how long a client's lookup leases outlive its last connection, for it to reconnect and keep them (a loopback client without a token: none; negative: none for any client)")
}

// registerServeAdmin adds the admin API's flags (its TLS and token are in
// registerServeSecurity).
func registerServeAdmin(fs *pflag.FlagSet, c *node.Config) {
	fs.StringVar(&c.AdminAddr, "admin-addr", c.AdminAddr, "HTTP admin and metrics listen address")
	fs.BoolVar(&c.EnablePprof, "pprof", c.EnablePprof, "serve Go runtime profiles at /debug/pprof/ on the admin address (for investigating; off by default)")
	fs.BoolVar(&c.AdminActions, "admin-actions", c.AdminActions, "allow the admin API's write actions (drain, undrain, forget, drop-namespace, evict, namespaces set) without an admin token; with --admin-token-file they need the token instead")
	fs.DurationVar(&c.AdminReadTimeout, "admin-read-timeout", c.AdminReadTimeout, "longest time to read an admin request (negative: no limit)")
	fs.DurationVar(&c.AdminWriteTimeout, "admin-write-timeout", c.AdminWriteTimeout, "longest time to answer an admin request; must exceed pprof profile durations (negative: no limit)")
	fs.DurationVar(&c.AdminIdleTimeout, "admin-idle-timeout", c.AdminIdleTimeout, "close admin keep-alive connections idle for this long")
	sizeVar(fs, &c.AdminMaxHeaderBytes, "admin-max-header-size", "largest admin request header")
}

// registerServeSpread adds the flags of hot-group spreading.
func registerServeSpread(fs *pflag.FlagSet, c *node.SpreadConfig) {
	fs.IntVar(&c.Threshold, "spread-threshold", c.Threshold, "lookups of one placement group within --spread-window that make it hot: its primary owner then copies it to --spread-width members, and its lookups and gets are shared by them (negative: never)")
	fs.DurationVar(&c.Window, "spread-window", c.Window, "the window hot groups are counted in")
	fs.IntVar(&c.Width, "spread-width", c.Width, "how many members hold a hot group, its owners included (0: grows with the cluster, 8 up to 64 members and one in 8 above)")
	fs.DurationVar(&c.TTL, "spread-ttl", c.TTL, "how long members keep a hot group's copies after it was last found hot (at most 1h)")
}

// registerServeSocket adds the local socket's flags. --socket's default is
// worked out once the flags are settled (servedSocketPath).
func registerServeSocket(fs *pflag.FlagSet, c *node.SocketConfig) {
	fs.StringVar(&c.Path, "socket", c.Path, "local Unix socket for engines on this host (Vineyard IPC and kvring extensions); \"\" turns it off; the Kubernetes manifests use "+containerSocket+" (default: "+defaultSocketName+" in --data-dir)")
	fs.Var((*fileMode)(&c.Mode), "socket-mode", "permission bits of the socket file, in octal")
}
