package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvring/kvring/internal/launch"
)

// control serves commands on a Unix socket, one per connection, one at a
// time: "stop I", "kill I", "pause I", "continue I" and "restart I
// [FLAG...]" (I from 1; the flags are added to the node's own for this
// start), each answered "ok" or "error: why" once done. After a command the env
// file is written again (a restarted node has a new pid). Its goroutine is
// waited for by close.
type control struct {
	c    *launch.Cluster
	env  string
	l    net.Listener
	wg   sync.WaitGroup
	stop context.CancelFunc
}

// serveControl listens on path and serves until close.
func serveControl(c *launch.Cluster, env, path string) (*control, error) {
	os.Remove(path) // a dead run's
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("cannot listen for commands: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ctl := &control{c: c, env: env, l: l, stop: cancel}
	ctl.wg.Go(func() { ctl.loop(ctx) })
	return ctl, nil
}

func (ctl *control) loop(ctx context.Context) {
	for {
		conn, err := ctl.l.Accept()
		if err != nil {
			return
		}
		ctl.serve(ctx, conn)
	}
}

// serve reads one command from conn, runs it and answers.
func (ctl *control) serve(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil && line == "" {
		return
	}
	reply := "ok"
	if err := ctl.run(ctx, strings.Fields(line)); err != nil {
		reply = "error: " + strings.ReplaceAll(err.Error(), "\n", "\n  ")
	}
	conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintln(conn, reply)
}

// run runs one command and writes the env file again.
func (ctl *control) run(ctx context.Context, cmd []string) error {
	if len(cmd) < 2 || len(cmd) > 2 && cmd[0] != "restart" {
		return fmt.Errorf("want COMMAND NODE (restart NODE [FLAG...]), got %q", cmd)
	}
	nodes := ctl.c.Nodes()
	i, err := strconv.Atoi(cmd[1])
	if err != nil || i < 1 || i > len(nodes) {
		return fmt.Errorf("no node %q: there are %d", cmd[1], len(nodes))
	}
	n := nodes[i-1]
	switch cmd[0] {
	case "stop":
		err = n.Stop()
	case "kill":
		n.Kill()
	case "pause":
		err = n.Pause()
	case "continue":
		err = n.Continue()
	case "restart":
		_, err = ctl.c.RestartWith(ctx, i-1, cmd[2:])
	default:
		err = errors.New("unknown command " + cmd[0] + ": want stop, kill, pause, continue or restart")
	}
	if err != nil {
		return err
	}
	return writeEnv(ctl.env, ctl.c, ctl.l.Addr().String())
}

// close stops serving and waits for the command in progress.
func (ctl *control) close() {
	ctl.l.Close()
	ctl.stop()
	ctl.wg.Wait()
}

// command is kvnodes' client mode, `kvnodes ctl SOCKET COMMAND NODE
// [FLAG...]`: it
// sends the command and prints the answer; it fails unless that is "ok".
func command(args []string) error {
	if len(args) < 3 {
		return errors.New("usage: kvnodes ctl SOCKET COMMAND NODE [FLAG...]")
	}
	conn, err := net.Dial("unix", args[0])
	if err != nil {
		return fmt.Errorf("cannot reach kvnodes: %w", err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintln(conn, strings.Join(args[1:], " ")); err != nil {
		return err
	}
	sc := bufio.NewScanner(conn)
	var reply []string
	for sc.Scan() {
		reply = append(reply, sc.Text())
	}
	if len(reply) == 1 && reply[0] == "ok" {
		return nil
	}
	if len(reply) == 0 {
		return errors.New("kvnodes did not answer")
	}
	return errors.New(strings.TrimPrefix(strings.Join(reply, "\n"), "error: "))
}
