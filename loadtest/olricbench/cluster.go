package olricbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"time"

	"github.com/buraksezer/olric"
	"github.com/buraksezer/olric/config"
)

// ClusterConfig configures an embedded Olric cluster. A zero field means its
// default.
type ClusterConfig struct {
	// Nodes is the number of Olric nodes. Default 3.
	Nodes int
	// MemoryPerNode is each node's DMap memory bound in bytes (Olric's
	// DMaps.MaxInuse, with LRU eviction), the counterpart of a kvring
	// node's --memory-limit. Olric splits it evenly over the partitions the
	// node owns (271 in all) and evicts within a partition once its share is
	// in use: at 256 MiB a partition holds about one 2 MiB value. Default
	// 256 MiB.
	MemoryPerNode int
	// TableSize is the size of the kvstore engine's tables in bytes. A value
	// must fit in one table with its key and entry header, so it bounds the
	// largest value: Olric's default, 1 MiB, refuses 2 MiB values. Default
	// 4 MiB.
	TableSize int
	// ReplicaCount is Olric's replication factor. Default 1.
	ReplicaCount int
	// StartTimeout bounds the start of every node. Default 30s.
	StartTimeout time.Duration
	// LogOutput receives Olric's logs (level WARN). Default: discarded.
	LogOutput io.Writer
}

func (c ClusterConfig) withDefaults() ClusterConfig {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.MemoryPerNode == 0 {
		c.MemoryPerNode = 256 << 20
	}
	if c.TableSize == 0 {
		c.TableSize = 4 << 20
	}
	if c.ReplicaCount == 0 {
		c.ReplicaCount = 1
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.LogOutput == nil {
		c.LogOutput = io.Discard
	}
	return c
}

// Cluster is an embedded Olric cluster: Nodes Olric instances in this
// process, each serving its RESP port and gossiping on 127.0.0.1 at ports
// picked at run time. Its methods are safe for concurrent use.
type Cluster struct {
	dbs   []*olric.Olric
	addrs []string
	done  []chan error // each node's Start result
}

// StartCluster starts the nodes one after the other, each joining the first,
// and returns once every node has started and sees all the others. It blocks
// up to cfg.StartTimeout; on failure it shuts down what it started.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	cfg = cfg.withDefaults()
	c := &Cluster{}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	var seed string
	for i := range cfg.Nodes {
		gossip, err := c.startNode(ctx, cfg, i, seed)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("cannot start olric node %d: %w", i+1, err), c.Close(context.Background()))
		}
		if seed == "" {
			seed = gossip
		}
	}
	if err := c.waitMembers(ctx, cfg.Nodes); err != nil {
		return nil, errors.Join(err, c.Close(context.Background()))
	}
	return c, nil
}

// startNode starts node i, joining seed when it is not empty, and waits for
// its Started callback. It returns the node's memberlist address.
func (c *Cluster) startNode(ctx context.Context, cfg ClusterConfig, i int, seed string) (string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	oc := config.New("local")
	oc.BindAddr, oc.BindPort = "127.0.0.1", ports[0]
	oc.MemberlistConfig.BindAddr, oc.MemberlistConfig.BindPort = "127.0.0.1", ports[1]
	oc.MemberlistConfig.AdvertiseAddr, oc.MemberlistConfig.AdvertisePort = "127.0.0.1", ports[1]
	oc.MemberlistConfig.Name = "olric-" + strconv.Itoa(i+1)
	if seed != "" {
		oc.Peers = []string{seed}
	}
	oc.ReplicaCount, oc.ReadQuorum, oc.WriteQuorum = cfg.ReplicaCount, 1, 1
	oc.MemberCountQuorum = 1
	oc.LogLevel, oc.LogVerbosity = config.LogLevelWarn, 1
	oc.LogOutput = cfg.LogOutput // Olric points Logger's output here
	oc.Logger = log.New(cfg.LogOutput, "olric-"+strconv.Itoa(i+1)+" ", log.LstdFlags)
	oc.DMaps.MaxInuse = cfg.MemoryPerNode
	oc.DMaps.EvictionPolicy = config.LRUEviction
	oc.DMaps.Engine = config.NewEngine()
	oc.DMaps.Engine.Config["tableSize"] = uint64(cfg.TableSize)
	started := make(chan struct{})
	oc.Started = func() { close(started) }

	db, err := olric.New(oc)
	if err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- db.Start() }()
	select {
	case <-started:
	case err := <-done:
		done <- err
		c.dbs, c.done = append(c.dbs, db), append(c.done, done)
		return "", fmt.Errorf("olric stopped while starting: %w", err)
	case <-ctx.Done():
		c.dbs, c.done = append(c.dbs, db), append(c.done, done)
		return "", ctx.Err()
	}
	c.dbs, c.done = append(c.dbs, db), append(c.done, done)
	c.addrs = append(c.addrs, net.JoinHostPort(oc.BindAddr, strconv.Itoa(oc.BindPort)))
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])), nil
}

// waitMembers polls every node's member list until each sees n members.
func (c *Cluster) waitMembers(ctx context.Context, n int) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		all := true
		for _, db := range c.dbs {
			ms, err := db.NewEmbeddedClient().Members(ctx)
			if err != nil || len(ms) < n {
				all = false
				break
			}
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("olric nodes did not see %d members: %w", n, ctx.Err())
		case <-t.C:
		}
	}
}

// Addrs returns the nodes' RESP addresses (HOST:PORT), for
// olric.NewClusterClient.
func (c *Cluster) Addrs() []string { return append([]string(nil), c.addrs...) }

// Close shuts every node down, in reverse order, and waits for their Start
// calls to return.
func (c *Cluster) Close(ctx context.Context) error {
	var errs []error
	for i := len(c.dbs) - 1; i >= 0; i-- {
		if err := c.dbs[i].Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("cannot shut down olric node %d: %w", i+1, err))
		}
		select {
		case <-c.done[i]:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("olric node %d did not stop: %w", i+1, ctx.Err()))
		}
	}
	c.dbs, c.done = nil, nil
	return errors.Join(errs...)
}

// freePorts returns n distinct loopback ports free for TCP and UDP right now
// (memberlist binds both). Another process may take one before it is bound:
// StartCluster then fails, naming the port.
func freePorts(n int) ([]int, error) {
	var ports []int
	var keep []io.Closer
	defer func() {
		for _, k := range keep {
			k.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cannot pick a port: %w", err)
		}
		keep = append(keep, l)
		p := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // UDP side taken: try another
		}
		keep = append(keep, u)
		ports = append(ports, p)
	}
	return ports, nil
}
