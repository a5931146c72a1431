package node

import (
	"fmt"
	"hash/fnv"
	"os"
	"time"

	"github.com/kvring/kvring/node/internal/localsock"
	"github.com/kvring/kvring/node/internal/localsock/sockcoord"
)

// SocketConfig configures the node's local Unix socket.
type SocketConfig struct {
	// Path is the socket file. Default "": no socket. A stale file left by
	// a crashed node is replaced; a live one (another process answers on
	// it) fails Start with an error naming the path. Close removes it.
	Path string
	// Mode is the socket file's permission bits. Default 0660.
	Mode os.FileMode
	// WriteTimeout: a client that does not read a reply for this long is
	// disconnected. Default 10s.
	WriteTimeout time.Duration
	// MaxConns is the most local connections served at once. Default 4096.
	MaxConns int
}

// instanceID is the Vineyard instance id of a node: a stable 31-bit hash
// of its id.
func instanceID(nodeID string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(nodeID))
	return uint64(h.Sum32() >> 1)
}

// openSocket creates the local socket (when configured) and serves it on a
// goroutine the node owns; Close (stopServers) closes it first.
func (n *Node) openSocket(p *nodeParts) error {
	sc := n.cfg.Socket
	if sc.Path == "" {
		return nil
	}
	t := time.Now()
	srv, err := localsock.Listen(localsock.Config{
		Path: sc.Path, Mode: sc.Mode, Store: p.store, Cluster: sockcoord.New(p.svc.Coord),
		InstanceID: instanceID(p.store.NodeID()), NodeName: p.store.NodeID(),
		RPCEndpoint: p.grpcLis.Addr().String(), WriteTimeout: sc.WriteTimeout, MaxConns: sc.MaxConns,
		MaxUnsealedBytes: p.store.MaxStagedBytes(),
		Logger:           n.log.With("component", "localsock"), Guard: p.guard,
	})
	if err != nil {
		return fmt.Errorf("cannot open the local socket: %w", err)
	}
	p.socket = srv
	n.serve("localsock", srv.Serve)
	n.phase("local socket", t, "path", sc.Path)
	return nil
}

// SocketPath is the local socket's path ("" when it is off or before
// Start).
func (n *Node) SocketPath() string {
	if p := n.parts.Load(); p != nil && p.socket != nil {
		return p.socket.Path()
	}
	return ""
}
