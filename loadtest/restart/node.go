package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kvring/kvring/internal/launch"
)

// startTimeout bounds a start, and stopTimeout a stop: a node that replays
// a large disk tier takes a while.
const (
	startTimeout = 10 * time.Minute
	stopTimeout  = 10 * time.Minute
)

// node is one kvring process (internal/launch) on its directories, started
// and stopped again by the command (its only owner). Its ports are picked
// by the kernel at the first start and kept across restarts.
type node struct {
	o               options
	dir, shmDir     string
	n               *launch.Node
	respAddr, admin string
}

// newNode makes the node's directories.
func newNode(o options) (*node, error) {
	dir, err := os.MkdirTemp("", "kvring-restart-")
	if err != nil {
		return nil, err
	}
	shm, err := os.MkdirTemp("/dev/shm", "kvring-restart-")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &node{o: o, dir: dir, shmDir: shm}, nil
}

// remove ends the node if it still runs and deletes its directories.
func (n *node) remove() {
	if n.n != nil {
		n.n.Close()
	}
	os.RemoveAll(n.dir)
	os.RemoveAll(n.shmDir)
}

// memoryLimit is -memory-limit, or twice the values' bytes (at least 1 GiB).
func (n *node) memoryLimit() string {
	if n.o.memory != "" {
		return n.o.memory
	}
	return fmt.Sprint(max(int64(n.o.chunks)*int64(n.o.size)*2, 1<<30))
}

// start runs `kvring serve` on the node's directories (and, after the first
// start, its ports) and waits until /readyz answers 200; it returns how
// long that took.
func (n *node) start(ctx context.Context) (time.Duration, error) {
	began := time.Now()
	var err error
	var again *launch.Node
	if n.n == nil {
		logPath := n.o.logPath
		if logPath == "" {
			logPath = filepath.Join(n.dir, "kvring.log")
		}
		again, err = launch.StartNode(ctx, launch.NodeConfig{Binary: n.o.kvring, Name: "the node", Dir: n.dir,
			ShmDir: n.shmDir, LogPath: logPath, MemoryLimit: n.memoryLimit(), RESP: true,
			Args: strings.Fields(n.o.extra), ReadyTimeout: startTimeout, StopTimeout: stopTimeout})
	} else {
		again, err = n.n.Restart(ctx, n.n.Config().Args)
	}
	if err != nil {
		return 0, err
	}
	n.n, n.respAddr, n.admin = again, again.RESP, again.Admin
	return time.Since(began), nil
}

// stop sends sig and waits for the process to end; it returns how long that
// took. A node already stopped is not an error.
func (n *node) stop(sig syscall.Signal) (time.Duration, error) {
	if n.n == nil {
		return 0, nil
	}
	t := time.Now()
	if sig == syscall.SIGKILL {
		n.n.Kill()
		return time.Since(t), nil
	}
	if err := n.n.Stop(); err != nil {
		return 0, fmt.Errorf("the node's exit after SIGTERM: %w", err)
	}
	return time.Since(t), nil
}
