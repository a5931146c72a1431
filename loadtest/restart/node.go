package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// node is one kvring process on fixed ports and directories, started and
// stopped again by the command (its only owner).
type node struct {
	o                options
	dataDir, shmDir  string
	respAddr, admin  string
	grpcAddr, gossip string
	cmd              *exec.Cmd
	exited           chan struct{} // closed when cmd has ended; waitErr is then set
	waitErr          error
}

// newNode picks the node's ports and makes its directories.
func newNode(o options) (*node, error) {
	data, err := os.MkdirTemp("", "kvring-restart-data-")
	if err != nil {
		return nil, err
	}
	shm, err := os.MkdirTemp("/dev/shm", "kvring-restart-")
	if err != nil {
		os.RemoveAll(data)
		return nil, err
	}
	n := &node{o: o, dataDir: data, shmDir: shm}
	for _, p := range []*string{&n.respAddr, &n.admin, &n.grpcAddr, &n.gossip} {
		if *p, err = freeAddr(); err != nil {
			n.remove()
			return nil, err
		}
	}
	return n, nil
}

// freeAddr is a 127.0.0.1 address whose port was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// remove deletes the node's directories.
func (n *node) remove() {
	os.RemoveAll(n.dataDir)
	os.RemoveAll(n.shmDir)
}

// memoryLimit is -memory-limit, or twice the values' bytes (at least 1 GiB).
func (n *node) memoryLimit() string {
	if n.o.memory != "" {
		return n.o.memory
	}
	return fmt.Sprint(max(int64(n.o.chunks)*int64(n.o.size)*2, 1<<30))
}

// start runs `kvring serve` on the node's ports and directories; it does not
// wait for it to serve.
func (n *node) start(ctx context.Context) error {
	args := []string{"serve", "--data-dir", n.dataDir, "--shm-dir", n.shmDir,
		"--grpc-addr", n.grpcAddr, "--gossip-addr", n.gossip, "--admin-addr", n.admin,
		"--resp-addr", n.respAddr, "--memory-limit", n.memoryLimit(), "--socket", ""}
	args = append(args, strings.Fields(n.o.extra)...)
	n.cmd = exec.CommandContext(ctx, n.o.kvring, args...)
	n.cmd.Stdout, n.cmd.Stderr = io.Discard, io.Discard
	if n.o.logPath != "" {
		f, err := os.OpenFile(n.o.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		n.cmd.Stdout, n.cmd.Stderr = f, f
	}
	if err := n.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.o.kvring, err)
	}
	n.exited = make(chan struct{})
	go func(c *exec.Cmd, done chan<- struct{}) {
		n.waitErr = c.Wait()
		close(done)
	}(n.cmd, n.exited)
	return nil
}

// stop sends sig and waits for the process to end; it returns how long that
// took. A node already stopped is not an error.
func (n *node) stop(sig syscall.Signal) (time.Duration, error) {
	if n.cmd == nil {
		return 0, nil
	}
	t := time.Now()
	if err := n.cmd.Process.Signal(sig); err != nil {
		return 0, fmt.Errorf("signal the node: %w", err)
	}
	<-n.exited
	n.cmd = nil
	if sig == syscall.SIGTERM && n.waitErr != nil {
		return 0, fmt.Errorf("the node's exit after SIGTERM: %w", n.waitErr)
	}
	return time.Since(t), nil
}

// waitReady polls /readyz until it answers 200 and returns the time since
// began.
func (n *node) waitReady(ctx context.Context, began time.Time) (time.Duration, error) {
	url := "http://" + n.admin + "/readyz"
	for {
		select {
		case <-n.exited:
			return 0, fmt.Errorf("the node exited before it was ready: %v", n.waitErr)
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(began), nil
			}
		}
		if time.Since(began) > 10*time.Minute {
			return 0, fmt.Errorf("not ready 10 minutes after start")
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
