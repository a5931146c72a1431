package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Cluster is the nodes Start launched, on directories it made. Its
// methods are safe for concurrent use.
type Cluster struct {
	cfg  Config
	dir  string   // Config.Dir, or the directory Start made for it
	made []string // directories Start made, removed on Close

	mu    sync.Mutex
	nodes []*Node    // the current process of each node
	args  [][]string // each node's flags at its first start
	all   []*Node    // every process started, for Close
}

// Start launches cfg.Nodes nodes one after the other (the second and later
// join the first unless cfg.NoJoin), each ready before the next starts,
// then waits until every node sees all of them active (unless NoJoin). On
// error everything started is stopped and removed. The caller must Close
// the cluster.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, dir: cfg.Dir}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "kvring-launch-"); err != nil {
			return nil, fmt.Errorf("cannot make the nodes' directory: %w", err)
		}
		c.made = append(c.made, c.dir)
	}
	for i := range cfg.Nodes {
		if err := c.startNode(ctx, i); err != nil {
			c.Close()
			return nil, err
		}
	}
	if !cfg.NoJoin {
		if err := c.WaitRing(ctx, cfg.RingTimeout); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// startNode makes node i's directories and starts it.
func (c *Cluster) startNode(ctx context.Context, i int) error {
	name := "n" + strconv.Itoa(i+1)
	dir := filepath.Join(c.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot make %s's directory: %w", name, err)
	}
	if c.cfg.Dir != "" {
		c.made = append(c.made, dir)
	}
	if err := os.MkdirAll(c.cfg.ShmRoot, 0o700); err != nil {
		return fmt.Errorf("cannot make %s's segment directory: %w", name, err)
	}
	shm, err := os.MkdirTemp(c.cfg.ShmRoot, "kvring-launch-"+name+"-")
	if err != nil {
		return fmt.Errorf("cannot make %s's segment directory: %w", name, err)
	}
	c.made = append(c.made, shm)
	args := slices.Clone(c.cfg.Flags)
	if i < len(c.cfg.NodeFlags) {
		args = append(args, c.cfg.NodeFlags[i]...)
	}
	if i > 0 && !c.cfg.NoJoin {
		args = append(args, "--join", c.Node(0).Gossip)
	}
	logPath := ""
	if c.cfg.LogPrefix != "" {
		logPath = c.cfg.LogPrefix + strconv.Itoa(i+1) + ".log"
	}
	n, err := StartNode(ctx, NodeConfig{Binary: c.cfg.Binary, Name: name, Dir: dir, ShmDir: shm, LogPath: logPath,
		MemoryLimit: c.cfg.MemoryLimit, RESP: c.cfg.RESP, Socket: c.cfg.Socket, Args: args, Env: c.cfg.Env,
		Prefix: c.cfg.Prefix, ReadyTimeout: c.cfg.ReadyTimeout, StopTimeout: c.cfg.StopTimeout, Logf: c.cfg.Logf})
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes = append(c.nodes, n)
	c.args = append(c.args, args)
	c.all = append(c.all, n)
	return nil
}

// Nodes is the current process of every node, in start order.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes)
}

// Node is node i's current process.
func (c *Cluster) Node(i int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// Restart starts node i again (it must have stopped: Stop or Kill) with
// the flags it was first started with, on its directories and addresses
// (Node.Restart), and makes the new process node i.
func (c *Cluster) Restart(ctx context.Context, i int) (*Node, error) {
	return c.RestartWith(ctx, i, nil)
}

// RestartWith is Restart with extra flags after the node's first ones, for
// this start only (the first node, which joined nobody, may have to join
// another to come back into the ring).
func (c *Cluster) RestartWith(ctx context.Context, i int, extra []string) (*Node, error) {
	old := c.Node(i)
	c.mu.Lock()
	args := slices.Concat(c.args[i], extra)
	c.mu.Unlock()
	n, err := old.Restart(ctx, args)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes[i] = n
	c.all = append(c.all, n)
	return n, nil
}

// Stop stops every node still running at once (Node.Stop: SIGTERM, then
// SIGKILL after StopTimeout) and waits for them; it returns their errors
// joined. Close must still be called.
func (c *Cluster) Stop() error {
	nodes := c.Nodes()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		select {
		case <-n.Done():
			continue // stopped or killed already
		default:
		}
		wg.Go(func() { errs[i] = n.Stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close kills every node still running (SIGKILL: use Stop first for a
// graceful end), waits for them, releases their ports and removes the
// directories Start made, segments included. Idempotent.
func (c *Cluster) Close() error {
	c.mu.Lock()
	all := c.all
	c.all, c.nodes = nil, nil
	c.mu.Unlock()
	for _, n := range all {
		n.Close()
	}
	var errs []error
	for _, d := range slices.Backward(c.made) {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("cannot remove %s: %w", d, err))
		}
	}
	c.made = nil
	return errors.Join(errs...)
}

// WaitRing waits until every current node's /v1/cluster lists all current
// nodes as alive, active ring members, bounded by timeout and ctx.
func (c *Cluster) WaitRing(ctx context.Context, timeout time.Duration) error {
	nodes := c.Nodes()
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		all := true
		for _, n := range nodes {
			all = all && SeesRing(ctx, n.Admin, ids...)
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the %d nodes did not all see each other within %v", len(nodes), timeout)
		case <-time.After(readyzEvery):
		}
	}
}

// clusterView is the part of the admin API's /v1/cluster that SeesRing
// reads.
type clusterView struct {
	Members []struct {
		ID         string `json:"id"`
		Liveness   string `json:"liveness"`
		State      string `json:"state"`
		RingMember bool   `json:"ring_member"`
	} `json:"members"`
}

// SeesRing reports whether the node whose admin address is admin lists
// exactly ids as alive, active ring members (GET /v1/cluster over plain
// HTTP).
func SeesRing(ctx context.Context, admin string, ids ...string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/v1/cluster", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var v clusterView
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&v) != nil {
		return false
	}
	var got []string
	for _, m := range v.Members {
		if m.Liveness == "alive" && m.State == "active" && m.RingMember {
			got = append(got, m.ID)
		}
	}
	slices.Sort(got)
	return slices.Equal(got, slices.Sorted(slices.Values(ids)))
}
