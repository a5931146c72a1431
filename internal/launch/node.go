package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrPortTaken is returned (wrapped) when a node exits at start because
// one of its addresses is in use.
var ErrPortTaken = errors.New("launch: a port of the node is taken")

// Node is one `kvring serve` process. Its address fields are set before
// StartNode (or Restart) returns and never change; a restart makes a new
// Node on the same directories and addresses. The methods are safe for
// concurrent use.
type Node struct {
	// ID is the node's id; GRPC, Admin and Gossip its addresses; RESP its
	// Redis-protocol address and RESPSocket its Redis-protocol Unix socket
	// ("" when it serves none), all as the node logged them when ready.
	ID, GRPC, Admin, Gossip, RESP, RESPSocket string

	cfg  NodeConfig
	cmd  *exec.Cmd
	log  *lineLog
	held *portHolds    // its ports while it is stopped; shared with the Node that restarts it
	done chan struct{} // closed once the process has exited and its output is read
	err  error         // cmd.Wait's, set before done is closed
}

// StartNode starts a node and waits until it is ready: it logged "node
// ready" and /readyz answers 200 (bounded by cfg.ReadyTimeout, and by ctx).
// On error the process is gone. The node's log goes to cfg.Dir/kvring.log
// and is kept in memory (Logs, AwaitLog). The caller must Close it.
func StartNode(ctx context.Context, cfg NodeConfig) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	n, err := spawn(cfg, &portHolds{})
	if err != nil {
		return nil, err
	}
	if err := n.awaitReady(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// spawn starts the process with its output going to a pipe that one
// goroutine reads until the process exits.
func spawn(cfg NodeConfig, held *portHolds) (*Node, error) {
	for _, d := range []string{cfg.Dir, cfg.DataDir, cfg.ShmDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("cannot make %s's directory: %w", cfg.Name, err)
		}
	}
	logf, err := os.OpenFile(filepath.Join(cfg.Dir, "kvring.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s's log: %w", cfg.Name, err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("cannot start %s: %w", cfg.Name, err)
	}
	args := cfg.args()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = cfg.env(os.Environ())
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = StartProcess(cmd)
	pw.Close()
	if err != nil {
		pr.Close()
		logf.Close()
		return nil, fmt.Errorf("cannot start %s (%s): %w", cfg.Name, cfg.Binary, err)
	}
	n := &Node{cfg: cfg, cmd: cmd, log: newLineLog(), held: held, done: make(chan struct{})}
	go n.reap(pr, logf)
	return n, nil
}

// reap copies the process's output to its log until the process ends,
// then waits for it.
func (n *Node) reap(out io.ReadCloser, logf *os.File) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		logf.WriteString(line + "\n")
		n.log.add(line)
	}
	io.Copy(io.Discard, out) // a line past the scanner's limit: drain, so the process never blocks
	out.Close()
	logf.Close()
	n.err = n.cmd.Wait()
	n.log.close()
	close(n.done)
}

// Config is the node's configuration, defaults filled in.
func (n *Node) Config() NodeConfig { return n.cfg }

// Pid is the process id (kvring's: Prefix must exec it).
func (n *Node) Pid() int { return n.cmd.Process.Pid }

// LogPath is the node's log file (shared with the Nodes that restart it).
func (n *Node) LogPath() string { return filepath.Join(n.cfg.Dir, "kvring.log") }

// Dir, DataDir, ShmDir and SocketPath are the node's directories and the
// path of its local socket (served only with NodeConfig.Socket).
func (n *Node) Dir() string        { return n.cfg.Dir }
func (n *Node) DataDir() string    { return n.cfg.DataDir }
func (n *Node) ShmDir() string     { return n.cfg.ShmDir }
func (n *Node) SocketPath() string { return n.cfg.SocketPath }

// Done is closed once the process has exited.
func (n *Node) Done() <-chan struct{} { return n.done }

// ExitCode is the process's exit code, -1 while it runs or when a signal
// ended it.
func (n *Node) ExitCode() int {
	select {
	case <-n.done:
		return n.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Logs is what the process has logged so far, one line per line.
func (n *Node) Logs() string { return strings.Join(n.log.snapshot(), "\n") }

// Close kills the process (SIGKILL to its group) if it still runs, waits
// for it and releases the ports held for it. It does not remove the
// node's directories (their owner does). Idempotent.
func (n *Node) Close() {
	n.kill()
	n.held.release()
}
