package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/node"
)

func newServeCmd() *cobra.Command {
	def := node.DefaultConfig()
	var (
		grpcAddr       = def.GRPCAddr
		advertiseAddr  = def.AdvertiseGRPCAddr
		gossipAddr     = def.Membership.GossipAddr
		gossipAdv      = def.Membership.AdvertiseAddr
		join           []string
		rejoin         = def.Membership.RejoinInterval
		settle         = def.Membership.SettleWindow
		replication    = def.Replication
		minReplicas    = def.MinReplicas
		maxBatch       = def.MaxBatchChunks
		adminAddr      = def.AdminAddr
		enablePprof    = def.EnablePprof
		dataDir        = def.Store.DataDir
		shmDir         = def.Store.ShmDir
		memLimit       = byteSize(def.Store.MemoryLimit)
		maxChunk       = byteSize(def.Store.MaxChunkSize)
		stageLease     = def.Store.StageLease
		putIdle        = def.PutIdleTimeout
		coalesceHas    = def.CoalescePeerHas
		maxNamespaces  = def.MaxNamespaces
		adminActions   = def.AdminActions
		shmOvercommit  = def.Store.AllowShmOvercommit
		maxPinned      = byteSize(def.Store.MaxPinnedBytes)
		maxStaged      = byteSize(def.Store.MaxStagedBytes)
		evictionPolicy = def.Store.Policy
		logFormat      = "text"
		logLevel       = "info"
		drainTimeout   = 30 * time.Second
		shutdownTime   = 10 * time.Second
		handoffRate    = byteSize(def.HandoffRate)
		handoffSweep   = def.HandoffSweep
		spreadCfg      = def.Spread

		maxStreams     = def.MaxStreamsPerConn
		maxRecvMsg     = byteSize(def.MaxRecvMsgBytes)
		kaMinTime      = def.KeepaliveMinTime
		kaTime         = def.KeepaliveTime
		kaTimeout      = def.KeepaliveTimeout
		maxConnIdle    = def.MaxConnIdle
		maxConnAge     = def.MaxConnAge
		maxConnGrace   = def.MaxConnAgeGrace
		adminRead      = def.AdminReadTimeout
		adminWrite     = def.AdminWriteTimeout
		adminIdle      = def.AdminIdleTimeout
		adminMaxHeader = byteSize(def.AdminMaxHeaderBytes)
		socketPath     = ""
		socketMode     = "0660"
		security       node.SecurityConfig
		respOpts       respFlags
		limits         limitsFlags
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a kvring node",
		Long: `Run a kvring node. Every flag can also be set with a KVRING_* environment variable
(--memory-limit is KVRING_MEMORY_LIMIT) or in the YAML file named by --config, whose
keys are flag names (memory-limit: 4GiB, join: [a, b]). A flag on the command line
wins over the environment, which wins over the file.
SIGINT or SIGTERM stop the node cleanly: readiness and gRPC health go false,
the node drains (it takes no new chunks and hands every chunk it holds to the
chunks' next owners, for up to --drain-timeout), leaves the cluster, requests
in flight finish (--shutdown-timeout), the store writes its catalog, and the
process exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadFlags(cmd); err != nil {
				return err
			}
			log, err := newLogger(os.Stderr, logFormat, logLevel)
			if err != nil {
				return err
			}
			cfg := node.DefaultConfig()
			cfg.GRPCAddr = grpcAddr
			cfg.AdvertiseGRPCAddr = advertiseAddr
			cfg.Membership.GossipAddr = gossipAddr
			cfg.Membership.AdvertiseAddr = gossipAdv
			cfg.Membership.Join = join
			cfg.Membership.RejoinInterval = rejoin
			cfg.Membership.SettleWindow = settle
			cfg.HandoffRate = int64(handoffRate)
			cfg.HandoffSweep = handoffSweep
			cfg.Spread = spreadCfg
			if handoffRate == 0 {
				cfg.HandoffRate = -1 // no cap
			}
			cfg.Membership.Logger = log.With("component", "membership")
			cfg.Replication = replication
			cfg.MinReplicas = minReplicas
			cfg.MaxBatchChunks = maxBatch
			cfg.AdminAddr = adminAddr
			cfg.EnablePprof = enablePprof
			cfg.Logger = log
			cfg.MaxStreamsPerConn = maxStreams
			cfg.MaxRecvMsgBytes = int(min(maxRecvMsg, 1<<31-1))
			cfg.KeepaliveMinTime = kaMinTime
			cfg.KeepaliveTime = kaTime
			cfg.KeepaliveTimeout = kaTimeout
			cfg.MaxConnIdle = maxConnIdle
			cfg.MaxConnAge = maxConnAge
			cfg.MaxConnAgeGrace = maxConnGrace
			cfg.AdminReadTimeout = adminRead
			cfg.AdminWriteTimeout = adminWrite
			cfg.AdminIdleTimeout = adminIdle
			cfg.AdminMaxHeaderBytes = int(min(adminMaxHeader, 1<<31-1))
			if cfg.Socket.Path, err = servedSocketPath(cmd, socketPath, dataDir); err != nil {
				return err
			}
			cfg.RESP = respOpts.config()
			if cfg.Socket.Mode, err = parseSocketMode(socketMode); err != nil {
				return err
			}
			cfg.Store.DataDir = dataDir
			cfg.Store.ShmDir = shmDir
			cfg.Store.MemoryLimit = int64(memLimit)
			cfg.Store.MaxChunkSize = int64(maxChunk)
			if !cmd.Flags().Changed("max-chunk-size") && os.Getenv(envName("max-chunk-size")) == "" {
				cfg.Store.MaxChunkSize = min(int64(maxChunk), int64(memLimit))
			}
			cfg.Store.StageLease = stageLease
			cfg.PutIdleTimeout = putIdle
			cfg.CoalescePeerHas = coalesceHas
			cfg.MaxNamespaces = maxNamespaces
			cfg.AdminActions = adminActions
			cfg.Store.AllowShmOvercommit = shmOvercommit
			cfg.Store.MaxPinnedBytes = int64(maxPinned)
			cfg.Store.MaxStagedBytes = int64(maxStaged)
			cfg.Store.Policy = evictionPolicy
			cfg.Store.Logger = log.With("component", "store")
			cfg.Security = security
			limits.apply(&cfg)
			n, err := node.New(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := n.Start(ctx); err != nil {
				return err
			}
			reloadOnHangup(ctx, n, log)
			<-ctx.Done()
			stop()
			log.Info("shutting down", "drain_timeout", drainTimeout, "shutdown_timeout", shutdownTime)
			if drainTimeout > 0 {
				dctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
				_, err := n.Leave(dctx)
				cancel()
				if err != nil {
					log.Warn("cannot drain before leaving", "err", err)
				}
			}
			cctx, cancel := context.WithTimeout(context.Background(), shutdownTime)
			defer cancel()
			if err := n.Close(cctx); err != nil {
				return fmt.Errorf("shutdown: %w", err)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&grpcAddr, "grpc-addr", grpcAddr, "gRPC listen address for engines and peers")
	fs.StringVar(&advertiseAddr, "advertise-addr", advertiseAddr, "gRPC address peers reach this node at (default: the listener, with the gossip host)")
	fs.StringVar(&gossipAddr, "gossip-addr", gossipAddr, "gossip (memberlist) listen address, TCP and UDP")
	fs.StringVar(&gossipAdv, "gossip-advertise-addr", gossipAdv, "gossip address peers reach this node at (default: derived)")
	fs.StringSliceVar(&join, "join", join, "gossip addresses of seed nodes to join, comma separated (retried until they answer)")
	fs.DurationVar(&rejoin, "rejoin-interval", rejoin, "how often the seeds are joined again so a split cluster heals")
	fs.DurationVar(&settle, "settle-window", settle, "after a ring change or this node's start, how long reads also ask members that do not own a chunk (negative: never)")
	fs.IntVar(&replication, "replication", replication, "replication factor of namespaces whose first client does not choose (at most 3)")
	fs.IntVar(&minReplicas, "min-replicas", minReplicas, "fewest holders for a write to count as stored, for such namespaces")
	fs.IntVar(&maxBatch, "max-batch", maxBatch, "most chunks one call may carry")
	fs.StringVar(&adminAddr, "admin-addr", adminAddr, "HTTP admin and metrics listen address")
	fs.BoolVar(&enablePprof, "pprof", enablePprof, "serve Go runtime profiles at /debug/pprof/ on the admin address (for investigating; off by default)")
	fs.StringVar(&dataDir, "data-dir", dataDir, "directory of the node's catalog (node identity, chunk catalog)")
	fs.StringVar(&shmDir, "shm-dir", shmDir, "directory of the shared-memory segment files")
	fs.Var(&memLimit, "memory-limit", "memory budget for chunk bytes (e.g. 1GiB, 512MiB)")
	fs.Var(&maxChunk, "max-chunk-size", "largest chunk accepted")
	fs.DurationVar(&stageLease, "stage-lease", stageLease, "how long a staged write waits for its commit")
	fs.BoolVar(&adminActions, "admin-actions", adminActions, "allow the admin API's write actions (drain, undrain, forget, drop-namespace, evict) without an admin token; with --admin-token-file they need the token instead")
	fs.IntVar(&maxNamespaces, "max-namespaces", maxNamespaces, "most namespaces the cluster registers; one more is refused")
	fs.BoolVar(&coalesceHas, "coalesce-peer-lookups", coalesceHas, "merge concurrent lookups of the same owner into one peer call while one is in flight (fewer calls with many concurrent lookups, a wait with few)")
	fs.DurationVar(&putIdle, "put-idle-timeout", putIdle, "end a put whose engine sends nothing for this long while its bytes are awaited, freeing what it staged (negative: no limit)")
	fs.BoolVar(&shmOvercommit, "shm-overcommit", shmOvercommit, "start even when the --shm-dir filesystem is smaller than --memory-limit (writes past its space are then rejected: no space)")
	fs.Var(&maxStaged, "max-staged", "most chunk bytes writes in progress may reserve at once, so stalled writes cannot push out stored chunks (default: half the memory limit)")
	fs.Var(&maxPinned, "max-pinned", "most chunk bytes lookup leases may pin at once (default: half the memory limit)")
	fs.StringVar(&evictionPolicy, "eviction-policy", evictionPolicy, "which chunks stay when memory is full: lru (least recently used goes first) or tinylfu (ristretto: frequency-based admission and eviction)")
	fs.StringVar(&logFormat, "log-format", logFormat, "log format: text or json")
	fs.StringVar(&logLevel, "log-level", logLevel, "log level: debug, info, warn or error")
	fs.DurationVar(&drainTimeout, "drain-timeout", drainTimeout, "on SIGTERM, how long the node hands its chunks to their next owners before it leaves (0: leave at once)")
	fs.DurationVar(&shutdownTime, "shutdown-timeout", shutdownTime, "on SIGTERM, how long the node waits for requests in flight after it left the cluster")
	fs.DurationVar(&handoffSweep, "handoff-sweep", handoffSweep, "how often the node checks, unprompted, that its chunks are on their owners with enough replicas (negative: only after ring changes)")
	fs.IntVar(&spreadCfg.Threshold, "spread-threshold", spreadCfg.Threshold, "lookups of one placement group within --spread-window that make it hot: its primary owner then copies it to --spread-width members, and its lookups and gets are shared by them (negative: never)")
	fs.DurationVar(&spreadCfg.Window, "spread-window", spreadCfg.Window, "the window hot groups are counted in")
	fs.IntVar(&spreadCfg.Width, "spread-width", spreadCfg.Width, "how many members hold a hot group, its owners included")
	fs.DurationVar(&spreadCfg.TTL, "spread-ttl", spreadCfg.TTL, "how long members keep a hot group's copies after it was last found hot (at most 1h)")
	fs.Var(&handoffRate, "handoff-rate", "most bytes per second the node copies to other nodes when it hands chunks off or re-replicates them (e.g. 256MiB; 0: no cap)")
	fs.IntVar(&maxStreams, "grpc-max-streams", maxStreams, "most calls one gRPC connection may have open at once; clients queue the rest")
	fs.Var(&maxRecvMsg, "grpc-max-recv-msg-size", "largest gRPC message accepted (must hold a 1 MiB frame and a call of --max-batch chunks)")
	fs.DurationVar(&kaMinTime, "grpc-keepalive-min-time", kaMinTime, "clients pinging more often than this are disconnected (GOAWAY too_many_pings); at most 10s")
	fs.DurationVar(&kaTime, "grpc-keepalive-time", kaTime, "after this long without activity the server pings a client")
	fs.DurationVar(&kaTimeout, "grpc-keepalive-timeout", kaTimeout, "a client that does not answer a ping within this is disconnected")
	fs.DurationVar(&maxConnIdle, "grpc-max-conn-idle", maxConnIdle, "close gRPC connections without a call in flight for this long (negative: never)")
	fs.DurationVar(&maxConnAge, "grpc-max-conn-age", maxConnAge, "close gRPC connections this old, after --grpc-max-conn-age-grace (0: never)")
	fs.DurationVar(&maxConnGrace, "grpc-max-conn-age-grace", maxConnGrace, "how long calls in flight may finish on a connection closed for its age")
	fs.DurationVar(&adminRead, "admin-read-timeout", adminRead, "longest time to read an admin request (negative: no limit)")
	fs.DurationVar(&adminWrite, "admin-write-timeout", adminWrite, "longest time to answer an admin request; must exceed pprof profile durations (negative: no limit)")
	fs.DurationVar(&adminIdle, "admin-idle-timeout", adminIdle, "close admin keep-alive connections idle for this long")
	fs.Var(&adminMaxHeader, "admin-max-header-size", "largest admin request header")
	fs.StringVar(&socketPath, "socket", socketPath, "local Unix socket for engines on this host (Vineyard IPC and kvring extensions); \"\" turns it off; the Kubernetes manifests use "+containerSocket+" (default: "+defaultSocketName+" in --data-dir)")
	fs.StringVar(&socketMode, "socket-mode", socketMode, "permission bits of the socket file, in octal")
	registerServeSecurity(fs, &security)
	registerServeRESP(fs, &respOpts)
	registerServeLimits(fs, &limits)
	annotateEnv(fs)
	return cmd
}

// defaultSocketName is the local socket's file name in the data directory
// when --socket is not set: one socket per node, so nodes started from one
// directory with their own data directories do not collide.
const defaultSocketName = "kvring.sock"

// containerSocket is the local socket's path in the container image's
// deployments (deploy/kubernetes sets KVRING_SOCKET to it): a directory of
// its own, which the host shares with the engines' pods.
const containerSocket = "/var/run/kvring/vineyard.sock"

// maxSocketPath is the longest path a Unix socket can be bound at on Linux
// (sun_path holds 108 bytes with the terminating NUL).
const maxSocketPath = 107

// servedSocketPath returns the local socket's path: --socket when it was
// set (on the command line, in the environment or the config file; "" turns
// the socket off), else defaultSocketName in the data directory. A path the
// kernel cannot bind is an error naming the flag.
func servedSocketPath(cmd *cobra.Command, flagValue, dataDir string) (string, error) {
	path, derived := flagValue, !cmd.Flags().Changed("socket")
	if derived {
		path = filepath.Join(dataDir, defaultSocketName)
	}
	if len(path) <= maxSocketPath {
		return path, nil
	}
	if derived {
		return "", fmt.Errorf("the local socket's path %q (%s in --data-dir) is %d bytes long, and a Unix socket path may have at most %d: set --socket to a shorter path, or to \"\" to turn the socket off",
			path, defaultSocketName, len(path), maxSocketPath)
	}
	return "", fmt.Errorf("--socket %q is %d bytes long, and a Unix socket path may have at most %d: use a shorter (or relative) path, or \"\" to turn the socket off",
		path, len(path), maxSocketPath)
}

// parseSocketMode parses --socket-mode: octal permission bits.
func parseSocketMode(s string) (os.FileMode, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m == 0 || m > 0o777 {
		return 0, fmt.Errorf("--socket-mode %q: want octal permission bits such as 0660", s)
	}
	return os.FileMode(m), nil
}
