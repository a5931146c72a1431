package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
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
		evictionPolicy = def.Store.Policy
		logFormat      = "text"
		logLevel       = "info"
		drainTimeout   = 10 * time.Second
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a kvring node",
		Long: `Run a kvring node. Every flag can also be set with a KVRING_* environment variable
(--memory-limit is KVRING_MEMORY_LIMIT) or in the YAML file named by --config, whose
keys are flag names (memory-limit: 4GiB, join: [a, b]). A flag on the command line
wins over the environment, which wins over the file.
SIGINT or SIGTERM stop the node cleanly: readiness goes false, requests in flight
finish, the store writes its catalog, and the process exits 0.`,
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
			cfg.Membership.Logger = log.With("component", "membership")
			cfg.Replication = replication
			cfg.MinReplicas = minReplicas
			cfg.MaxBatchChunks = maxBatch
			cfg.AdminAddr = adminAddr
			cfg.EnablePprof = enablePprof
			cfg.Logger = log
			cfg.Store.DataDir = dataDir
			cfg.Store.ShmDir = shmDir
			cfg.Store.MemoryLimit = int64(memLimit)
			cfg.Store.MaxChunkSize = int64(maxChunk)
			if !cmd.Flags().Changed("max-chunk-size") && os.Getenv(envName("max-chunk-size")) == "" {
				cfg.Store.MaxChunkSize = min(int64(maxChunk), int64(memLimit))
			}
			cfg.Store.StageLease = stageLease
			cfg.Store.Policy = evictionPolicy
			cfg.Store.Logger = log.With("component", "store")
			n, err := node.New(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := n.Start(ctx); err != nil {
				return err
			}
			<-ctx.Done()
			stop()
			log.Info("shutting down", "drain_timeout", drainTimeout)
			cctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
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
	fs.StringVar(&evictionPolicy, "eviction-policy", evictionPolicy, "which chunks stay when memory is full: lru (least recently used goes first) or tinylfu (ristretto: frequency-based admission and eviction)")
	fs.StringVar(&logFormat, "log-format", logFormat, "log format: text or json")
	fs.StringVar(&logLevel, "log-level", logLevel, "log level: debug, info, warn or error")
	fs.DurationVar(&drainTimeout, "drain-timeout", drainTimeout, "how long shutdown waits for requests in flight")
	annotateEnv(fs)
	return cmd
}
