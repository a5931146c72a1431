package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/kvring/kvring/internal/launch"
)

// Ports every node uses on its own address.
const (
	grpcPort   = 9600
	gossipPort = 7946
	adminPort  = 9602
)

func shmDir(cfg Config, i int) string { return filepath.Join("/dev/shm", cfg.Run+"-n"+strconv.Itoa(i)) }

// cluster starts, pauses, kills and restarts the nodes, each with `ip netns
// exec` in its namespace (which execs kvring, so the pid is kvring's). It
// records when each node was down or paused, for the checker. Safe for
// concurrent use.
type cluster struct {
	cfg  Config
	topo topology
	t0   time.Time

	mu    sync.Mutex
	procs []*proc
	// out[i] are the intervals node i could not answer: killed until
	// restarted, or stopped until continued.
	out [][]interval
	// killed[i]: node i was SIGKILLed at least once.
	killed []bool
}

// proc is a running node: launch.Process, so it dies with the harness
// (Pdeathsig) in a process group of its own, its output appended to its
// log.
type proc = launch.Process

type interval struct{ from, to time.Time } // to is zero while it lasts

func newCluster(cfg Config, topo topology, t0 time.Time) *cluster {
	return &cluster{cfg: cfg, topo: topo, t0: t0, procs: make([]*proc, cfg.Nodes), out: make([][]interval, cfg.Nodes), killed: make([]bool, cfg.Nodes)}
}

func (c *cluster) grpcAddr(i int) string {
	return net.JoinHostPort(c.topo.nodeIP(i), strconv.Itoa(grpcPort))
}
func (c *cluster) adminAddr(i int) string {
	return net.JoinHostPort(c.topo.nodeIP(i), strconv.Itoa(adminPort))
}
func (c *cluster) gossipAddr(i int) string {
	return net.JoinHostPort(c.topo.nodeIP(i), strconv.Itoa(gossipPort))
}

// start starts node i (again, after a kill: same data and shm directories).
func (c *cluster) start(i int) error {
	var join []string
	for j := range c.cfg.Nodes {
		if j != i {
			join = append(join, c.gossipAddr(j))
		}
	}
	dataDir := filepath.Join(c.cfg.Dir, "n"+strconv.Itoa(i))
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	args := []string{"netns", "exec", c.topo.nodeNS(i), c.cfg.Kvring, "serve",
		"--grpc-addr", c.grpcAddr(i), "--gossip-addr", c.gossipAddr(i), "--admin-addr", c.adminAddr(i),
		"--resp-addr", "", "--socket", "",
		"--data-dir", dataDir, "--shm-dir", shmDir(c.cfg, i), "--memory-limit", c.cfg.MemoryLimit,
		"--log-format", "json", "--drain-timeout", "0",
	}
	if len(join) > 0 {
		args = append(args, "--join", joinList(join))
	}
	args = append(args, c.cfg.ExtraArgs...)
	// Not launch.StartNode: the node must not be waited for (the schedule
	// restarts a node and goes on; formCluster waits for all at once), and
	// it listens on its namespace's address with fixed ports.
	p, err := launch.Spawn(launch.Command{Name: "node " + strconv.Itoa(i), Args: append([]string{"ip"}, args...),
		LogPath: filepath.Join(c.cfg.Out, "node"+strconv.Itoa(i)+".log")})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs[i] = p
	c.mu.Unlock()
	return nil
}

func joinList(addrs []string) string {
	s := ""
	for k, a := range addrs {
		if k > 0 {
			s += ","
		}
		s += a
	}
	return s
}

func (c *cluster) proc(i int) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[i]
}

func (c *cluster) markOut(i int, now time.Time) {
	c.mu.Lock()
	c.out[i] = append(c.out[i], interval{from: now})
	c.mu.Unlock()
}

func (c *cluster) markBack(i int, now time.Time) {
	c.mu.Lock()
	if k := len(c.out[i]) - 1; k >= 0 && c.out[i][k].to.IsZero() {
		c.out[i][k].to = now
	}
	c.mu.Unlock()
}

// kill SIGKILLs node i and waits for it to exit.
func (c *cluster) kill(i int) error {
	p := c.proc(i)
	if p == nil {
		return fmt.Errorf("node %d is not running", i)
	}
	c.markOut(i, time.Now())
	c.mu.Lock()
	c.killed[i] = true
	c.mu.Unlock()
	p.Kill() // SIGKILL ends a paused (SIGSTOPped) node as well
	c.mu.Lock()
	c.procs[i] = nil
	c.mu.Unlock()
	return nil
}

// restart starts node i after a kill; it is counted back once it starts.
func (c *cluster) restart(i int) error {
	if err := c.start(i); err != nil {
		return err
	}
	c.markBack(i, time.Now())
	return nil
}

func (c *cluster) pause(i int) error {
	p := c.proc(i)
	if p == nil {
		return fmt.Errorf("node %d is not running", i)
	}
	c.markOut(i, time.Now())
	return p.Signal(syscall.SIGSTOP)
}

func (c *cluster) resume(i int) error {
	p := c.proc(i)
	if p == nil {
		return fmt.Errorf("node %d is not running", i)
	}
	err := p.Signal(syscall.SIGCONT)
	c.markBack(i, time.Now())
	return err
}

// wasOut reports whether node i was down or paused for all of [from, to]:
// it could not have answered anything in that time.
func (c *cluster) wasOut(i int, from, to time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, iv := range c.out[i] {
		if !iv.from.After(from) && (iv.to.IsZero() || !iv.to.Before(to)) {
			return true
		}
	}
	return false
}

// everKilled reports whether node i was ever SIGKILLed.
func (c *cluster) everKilled(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.killed[i]
}

// stopAll ends every node: SIGTERM (the nodes run with --drain-timeout 0),
// then SIGKILL for any still running after 15 s.
func (c *cluster) stopAll(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range c.cfg.Nodes {
		p := c.proc(i)
		if p == nil {
			continue
		}
		wg.Go(func() {
			p.Signal(syscall.SIGCONT)
			p.Signal(syscall.SIGTERM)
			select {
			case <-p.Done():
			case <-time.After(15 * time.Second):
				p.Kill()
			case <-ctx.Done():
				p.Kill()
			}
		})
	}
	wg.Wait()
}
