package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvring/kvring/node"
)

// serveOptions are serve's settings: the node's configuration, whose fields
// the flags set directly (serve_flags.go), and the few that belong to the
// command. newServeOptions gives every default, taken from the package that
// owns the setting; the command's own are written here once.
type serveOptions struct {
	node node.Config
	// logFormat and logLevel configure the logger (newLogger).
	logFormat, logLevel string
	// drainTimeout bounds the drain on SIGTERM (0: leave at once);
	// shutdownTimeout the wait for requests in flight after it.
	drainTimeout, shutdownTimeout time.Duration
}

// newServeOptions returns serve's defaults: node.DefaultConfig() with the
// command's choices (the Redis-protocol port on, the socket in the data
// directory: servedSocketPath).
func newServeOptions() *serveOptions {
	o := &serveOptions{node: node.DefaultConfig(), logFormat: "text", logLevel: "info",
		drainTimeout: 30 * time.Second, shutdownTimeout: 10 * time.Second}
	o.node.RESP.Addr = defaultRESPAddr
	return o
}

func newServeCmd() *cobra.Command {
	o := newServeOptions()
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
			cfg, err := o.config(cmd)
			if err != nil {
				return err
			}
			return o.run(cfg)
		},
	}
	registerServeFlags(cmd.Flags(), o)
	annotateEnv(cmd.Flags())
	return cmd
}

// config is the node's configuration once the flags are settled: the
// fields the flags set, and the settings that follow other flags.
func (o *serveOptions) config(cmd *cobra.Command) (node.Config, error) {
	log, err := newLogger(os.Stderr, o.logFormat, o.logLevel)
	if err != nil {
		return node.Config{}, err
	}
	cfg := o.node
	cfg.Logger = log
	cfg.Build = buildInfo()
	cfg.Membership.Logger = log.With("component", "membership")
	cfg.Store.Logger = log.With("component", "store")
	if cfg.HandoffRate == 0 {
		cfg.HandoffRate = -1 // --handoff-rate 0: no cap
	}
	if !cmd.Flags().Changed("max-chunk-size") {
		cfg.Store.MaxChunkSize = min(cfg.Store.MaxChunkSize, cfg.Store.MemoryLimit)
	}
	if cfg.Socket.Path, err = servedSocketPath(cmd, cfg.Socket.Path, cfg.Store.DataDir); err != nil {
		return node.Config{}, err
	}
	cfg.RESP.KeyMap.Siblings = slices.Clone(cfg.RESP.KeyMap.Siblings)
	if err := checkDiskFlags(cfg.Disk); err != nil {
		return node.Config{}, err
	}
	return cfg, nil
}

// run starts the node and serves until SIGINT or SIGTERM, then drains,
// leaves and closes it.
func (o *serveOptions) run(cfg node.Config) error {
	log := cfg.Logger
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
	log.Info("shutting down", "drain_timeout", o.drainTimeout, "shutdown_timeout", o.shutdownTimeout)
	if o.drainTimeout > 0 {
		dctx, cancel := context.WithTimeout(context.Background(), o.drainTimeout)
		_, err := n.Leave(dctx)
		cancel()
		if err != nil {
			log.Warn("cannot drain before leaving", "err", err)
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := n.Close(cctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
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
