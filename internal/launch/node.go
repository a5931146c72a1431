package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
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

	*Process
	cfg  NodeConfig
	held *portHolds // its ports while it is stopped; shared with the Node that restarts it
}

// StartNode starts a node and waits until it is ready: /readyz answers
// 200, and it logged "node ready" unless its log level hides that line
// (bounded by cfg.ReadyTimeout, and by ctx). Addresses with port 0 get a
// free loopback port, held until the node listens (pickPorts); a node that
// still finds a port taken is started again on other ports. On error the
// process is gone. The node's log goes to cfg.LogPath and is kept in
// memory (Logs, AwaitLog). The caller must Close it.
func StartNode(ctx context.Context, cfg NodeConfig) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	for {
		n, err := startPicked(ctx, cfg)
		if err == nil || !errors.Is(err, ErrPortTaken) || ctx.Err() != nil {
			return n, err
		}
		cfg.Logf("%s found a port taken; starting it on others: %v", cfg.Name, err)
	}
}

// startPicked starts the node on ports picked for it and waits until it is
// ready.
func startPicked(ctx context.Context, cfg NodeConfig) (*Node, error) {
	picked, err := pickPorts(&cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot pick ports for %s: %w", cfg.Name, err)
	}
	defer picked.release()
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

// spawn makes the node's directories and starts its process.
func spawn(cfg NodeConfig, held *portHolds) (*Node, error) {
	for _, d := range []string{cfg.Dir, cfg.DataDir, cfg.ShmDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("cannot make %s's directory: %w", cfg.Name, err)
		}
	}
	p, err := Spawn(Command{Name: cfg.Name, Args: cfg.args(), Env: cfg.env(os.Environ()),
		LogPath: cfg.LogPath})
	if err != nil {
		return nil, err
	}
	return &Node{Process: p, cfg: cfg, held: held}, nil
}

// Config is the node's configuration, defaults filled in.
func (n *Node) Config() NodeConfig { return n.cfg }

// LogPath is the node's log file (shared with the Nodes that restart it).
func (n *Node) LogPath() string { return n.cfg.LogPath }

// Dir, DataDir, ShmDir and SocketPath are the node's directories and the
// path of its local socket (served only with NodeConfig.Socket).
func (n *Node) Dir() string        { return n.cfg.Dir }
func (n *Node) DataDir() string    { return n.cfg.DataDir }
func (n *Node) ShmDir() string     { return n.cfg.ShmDir }
func (n *Node) SocketPath() string { return n.cfg.SocketPath }

// Close kills the process (SIGKILL to its group) if it still runs, waits
// for it and releases the ports held for it. It does not remove the
// node's directories (their owner does). Idempotent.
func (n *Node) Close() {
	n.Process.Kill()
	n.held.release()
}
