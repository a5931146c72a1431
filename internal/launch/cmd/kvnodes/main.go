// Command kvnodes starts N real kvring nodes (internal/launch) for the
// loadtest shell scripts, writes a file the scripts source to learn the
// nodes' addresses, pids and directories, and keeps the nodes until it is
// told to stop: SIGTERM or SIGINT, its standard input closing (when that is
// a pipe or a socket), or the death of its parent. Then it stops every
// node (SIGTERM, then SIGKILL after the stop timeout), removes what it
// made and exits.
//
//	kvnodes -n 3 -kvring .bin/kvring -resp -env $work/nodes.env -- --log-level warn &
//
// Arguments after the options (after "--") are `kvring serve` flags for
// every node, after -flags.
//
// The env file appears (renamed into place) once every node is ready and
// sees all of them active; it sets the bash arrays grpcs, admins, gossips,
// resps, sockets, ids, node_pids, logs, data_dirs and shm_dirs (index 0 is
// the first node), kv_nodes, and kv_control, the Unix socket (-control,
// default ENV.ctl) on which
//
//	kvnodes ctl SOCKET stop|kill|pause|continue|restart NODE [FLAG...]
//
// stops (SIGTERM, bounded), kills, pauses (SIGSTOP), continues or restarts
// (same directories, addresses and flags, and FLAGs for this start; ready
// again) node NODE (from 1)
// and returns once that is done, after writing the env file again.
// loadtest/nodes.sh wraps all this for the scripts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/internal/launch"
)

// options are the command's flags.
type options struct {
	cfg       launch.Config
	flags     string
	nodeFlags nodeFlags
	env       string
	control   string
}

// nodeFlags is -node-flags, given once per node that needs its own flags:
// "I=flags" (I from 1).
type nodeFlags map[int]string

func (f nodeFlags) String() string { return fmt.Sprint(map[int]string(f)) }

func (f nodeFlags) Set(s string) error {
	i, flags, ok := strings.Cut(s, "=")
	n, err := strconv.Atoi(i)
	if !ok || err != nil || n < 1 {
		return fmt.Errorf("want I=flags with I from 1, got %q", s)
	}
	f[n] = flags
	return nil
}

func parseFlags(args []string) (options, error) {
	o := options{nodeFlags: nodeFlags{}}
	fs := flag.NewFlagSet("kvnodes", flag.ContinueOnError)
	fs.IntVar(&o.cfg.Nodes, "n", 1, "nodes to start; the second and later join the first")
	fs.StringVar(&o.cfg.Binary, "kvring", "", "the kvring binary (required)")
	fs.StringVar(&o.env, "env", "", "the file to write the nodes' addresses to, for a shell to source (required)")
	fs.StringVar(&o.control, "control", "", "the Unix socket `kvnodes ctl` commands come on (default ENV.ctl)")
	fs.StringVar(&o.cfg.Dir, "dir", "", "where the nodes' directories go (default: a new directory in $TMPDIR, removed at exit)")
	fs.StringVar(&o.cfg.LogPrefix, "log-prefix", "", "put node I's log at PREFIXI.log, kept at exit (default: in the node's directory, removed)")
	fs.StringVar(&o.cfg.ShmRoot, "shm-root", "/dev/shm", "where the nodes' segment directories go (removed at exit)")
	fs.StringVar(&o.cfg.MemoryLimit, "memory-limit", launch.DefaultMemoryLimit, "each node's --memory-limit")
	fs.BoolVar(&o.cfg.RESP, "resp", false, "serve the Redis protocol on a port the kernel picks")
	fs.BoolVar(&o.cfg.Socket, "socket", false, "serve the local socket in each node's directory")
	fs.StringVar(&o.flags, "flags", "", "more `kvring serve` flags for every node, space-separated")
	fs.Var(o.nodeFlags, "node-flags", "`I=flags`: more flags for node I (from 1), after -flags; repeat for more nodes")
	fs.BoolVar(&o.cfg.NoJoin, "no-join", false, "no --join added and no wait for a ring: give --join in the flags to join a running cluster")
	fs.DurationVar(&o.cfg.ReadyTimeout, "ready-timeout", launch.DefaultReadyTimeout, "bound on each node's start")
	fs.DurationVar(&o.cfg.StopTimeout, "stop-timeout", launch.DefaultStopTimeout, "bound on each node's exit after SIGTERM, then SIGKILL")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.cfg.Binary == "" || o.env == "" {
		return o, errors.New("-kvring and -env are required")
	}
	if o.control == "" {
		o.control = o.env + ".ctl"
	}
	o.cfg.Flags = append(strings.Fields(o.flags), fs.Args()...)
	for i, f := range o.nodeFlags {
		if i > o.cfg.Nodes {
			return o, fmt.Errorf("-node-flags for node %d of %d", i, o.cfg.Nodes)
		}
		for len(o.cfg.NodeFlags) < i {
			o.cfg.NodeFlags = append(o.cfg.NodeFlags, nil)
		}
		o.cfg.NodeFlags[i-1] = strings.Fields(f)
	}
	o.cfg.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "kvnodes: "+format+"\n", args...) }
	return o, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "ctl" {
		if err := command(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "kvnodes:", err)
			os.Exit(1)
		}
		return
	}
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kvnodes:", err)
		os.Exit(1)
	}
}

// run starts the nodes, writes the env file and waits until it is told to
// stop; then it stops the nodes and removes what it made.
func run(o options) error {
	ppid := os.Getppid()
	// The parent's death (a script killed with SIGKILL, say) stops the
	// nodes too; a parent that died before this call is caught below.
	unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	if os.Getppid() != ppid {
		return errors.New("the parent exited before the nodes started")
	}
	c, err := launch.Start(ctx, o.cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	ctl, err := serveControl(c, o.env, o.control)
	if err != nil {
		return err
	}
	defer os.Remove(o.control)
	defer ctl.close()
	if err := writeEnv(o.env, c, o.control); err != nil {
		return err
	}
	defer os.Remove(o.env)
	<-stopped(ctx)
	ctl.close()
	return c.Stop()
}

// stopped is closed when ctx ends (a signal) or, if standard input is a
// pipe or a socket, when it closes. A terminal or /dev/null (a background
// job's) does not count.
func stopped(ctx context.Context) <-chan struct{} {
	fi, err := os.Stdin.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return ctx.Done()
	}
	eof := make(chan struct{})
	go func() { // ends with the process: a read of stdin cannot be interrupted
		io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-eof:
		}
		close(done)
	}()
	return done
}
