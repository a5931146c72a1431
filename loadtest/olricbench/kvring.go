package olricbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/kvring/kvring/node"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/store"
)

// KvringClusterConfig configures an in-process kvring cluster. A zero field
// means its default.
type KvringClusterConfig struct {
	// Nodes is the number of nodes. Default 3.
	Nodes int
	// MemoryPerNode is each node's store memory limit in bytes (kvring
	// serve --memory-limit). Default 256 MiB.
	MemoryPerNode int64
	// StartTimeout bounds the start of the cluster. Default 30s.
	StartTimeout time.Duration
}

// KvringCluster is a kvring cluster of real nodes (node.New, as kvring serve
// runs them) in this process, on 127.0.0.1 at ports picked at run time, each
// with a data directory and a /dev/shm directory of its own that Close
// removes. Replication is the node default, 1.
type KvringCluster struct {
	nodes []*node.Node
	dirs  []string
}

// StartKvringCluster starts the nodes, each joining the first, and returns
// once every node is ready and its ring holds all of them. It blocks up to
// cfg.StartTimeout; on failure it closes what it started.
func StartKvringCluster(ctx context.Context, cfg KvringClusterConfig) (*KvringCluster, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.MemoryPerNode == 0 {
		cfg.MemoryPerNode = 256 << 20
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	k := &KvringCluster{}
	fail := func(err error) (*KvringCluster, error) {
		return nil, errors.Join(err, k.Close(context.Background()))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := range cfg.Nodes {
		data, err := os.MkdirTemp("", "kvring-olricbench-data-")
		if err != nil {
			return fail(err)
		}
		k.dirs = append(k.dirs, data)
		shm, err := os.MkdirTemp("/dev/shm", "kvring-olricbench-shm-")
		if err != nil {
			return fail(err)
		}
		k.dirs = append(k.dirs, shm)
		nc := node.DefaultConfig()
		nc.GRPCAddr, nc.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
		nc.Membership = membership.LocalConfig("")
		nc.Membership.Ring.ReplicationFactor = 3
		if i > 0 {
			nc.Membership.Join = []string{k.nodes[0].GossipAddr()}
		}
		nc.Membership.Logger = quiet
		nc.Store = store.DefaultConfig(data)
		nc.Store.ShmDir, nc.Store.MemoryLimit = shm, cfg.MemoryPerNode
		nc.Store.Logger, nc.Logger = quiet, quiet
		n, err := node.New(nc)
		if err != nil {
			return fail(fmt.Errorf("cannot create kvring node %d: %w", i+1, err))
		}
		if err := n.Start(ctx); err != nil {
			return fail(fmt.Errorf("cannot start kvring node %d: %w", i+1, err))
		}
		k.nodes = append(k.nodes, n)
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !k.settled(cfg.Nodes) {
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("kvring nodes did not all see %d members: %w", cfg.Nodes, ctx.Err()))
		case <-t.C:
		}
	}
	return k, nil
}

func (k *KvringCluster) settled(n int) bool {
	for _, nd := range k.nodes {
		if !nd.Ready() || nd.Ring() == nil || nd.Ring().Len() < n {
			return false
		}
	}
	return true
}

// Addrs returns the nodes' gRPC addresses, the SDK's seeds.
func (k *KvringCluster) Addrs() []string {
	var out []string
	for _, n := range k.nodes {
		out = append(out, n.GRPCAddr())
	}
	return out
}

// Close closes the nodes in reverse order and removes their directories.
func (k *KvringCluster) Close(ctx context.Context) error {
	var errs []error
	for i := len(k.nodes) - 1; i >= 0; i-- {
		if err := k.nodes[i].Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("cannot close kvring node %d: %w", i+1, err))
		}
	}
	for _, d := range k.dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	k.nodes, k.dirs = nil, nil
	return errors.Join(errs...)
}
