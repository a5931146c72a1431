package node

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/kvring/kvring/node/internal/netguard"
	"github.com/kvring/kvring/node/internal/resp"
	"github.com/kvring/kvring/node/internal/resp/respcoord"
	"github.com/kvring/kvring/node/internal/sockfile"
)

// RESPConfig configures the node's Redis-protocol port (docs/resp.md).
type RESPConfig struct {
	// Addr is the TCP address of the Redis-protocol port. Default "":
	// off (kvring serve's --resp-addr defaults to :9603).
	Addr string
	// Socket is a Unix socket file the port is also served on, for engines
	// on this host (LMCache's remote_url unix:///path). The same commands,
	// authentication and limits as on Addr (MaxConns counts both); no TLS.
	// A stale file left by a killed node is replaced; a live socket, or a
	// file that is not a socket, fails Start with an error naming the
	// path. Close removes it. Default "": none.
	Socket string
	// SocketMode is the socket file's permission bits. Default 0660 (the
	// node's user and group).
	SocketMode os.FileMode
	// KeyMap maps keys to namespaces and placement; it must be the same
	// on every node. Default resp.DefaultKeyMap() (LMCache's keys).
	KeyMap RESPKeyMap
	// MaxConns is the most connections at once. Default 10000.
	MaxConns int
	// IdleTimeout closes a connection that sends no command for this long.
	// Default 5m; negative: never.
	IdleTimeout time.Duration
	// CommandTimeout is how long a command may take to arrive once its
	// first byte has (a client that trickles bytes is disconnected).
	// Default 30s.
	CommandTimeout time.Duration
	// MaxClientMemory bounds the heap all connections hold together for
	// arguments and queued replies (resp.Config.MaxClientMemory). Default
	// resp.DefaultMaxClientMemory (512 MiB); negative: no bound.
	MaxClientMemory int64
	// ClusterMode answers as a Redis Cluster (resp.Config.ClusterMode): the
	// slots follow the ring, keys are placed by slot, a key this node does
	// not own is answered -MOVED. Every node must agree. Default off.
	ClusterMode bool
	// ExistsLease pins a key that EXISTS found held for this long, so a GET
	// within it finds it (resp.Config.ExistsLease). Default
	// resp.DefaultExistsLease (2s); negative: no lease.
	ExistsLease time.Duration
	// SentinelMaster is the master name SENTINEL answers for (every node
	// acts as a Redis Sentinel that names itself the master:
	// resp.Config.SentinelMaster). Default resp.DefaultSentinelMaster
	// ("kvring").
	SentinelMaster string
}

// openRESP serves the Redis-protocol port (when configured: listen opened
// it) on a goroutine the node owns; Close (stopServers) closes it first.
func (n *Node) openRESP(p *nodeParts) error {
	rc := n.cfg.RESP
	lis, err := n.respListeners(p)
	if err != nil || len(lis) == 0 {
		return err
	}
	t := time.Now()
	p.respCluster = respcoord.New(respcoord.Config{Coord: p.svc.Coord, Registry: p.svc.Registry, Store: p.store,
		Members: p.member.Members, Ring: p.member.Ring, Draining: p.member.Draining, Unsettled: p.member.Unsettled,
		Replicas: n.cfg.Replication, Credentials: p.sec, AdminActions: n.cfg.AdminActions, Metrics: p.svc.Metrics,
		Logger: n.log})
	srv, err := resp.New(resp.Config{Store: p.store, Cluster: p.respCluster, KeyMap: rc.KeyMap,
		ClusterMode: rc.ClusterMode, TLS: p.sec.ServerTLS(), NodeID: p.store.NodeID(), MaxConns: rc.MaxConns,
		IdleTimeout: rc.IdleTimeout, CommandTimeout: rc.CommandTimeout, MaxClientMemory: rc.MaxClientMemory,
		MaxValueBytes: p.store.MaxStagedBytes(), ExistsLease: rc.ExistsLease, SentinelMaster: rc.SentinelMaster, Build: n.cfg.Build,
		Logger: n.log.With("component", "resp")}, lis...)
	if err != nil {
		if p.respSock != nil {
			p.respSock.Close()
		}
		return fmt.Errorf("cannot serve the Redis protocol: %w", err)
	}
	if p.respUnmetrics, err = registerAll(n.cfg.Registerer, srv.Collectors()...); err != nil {
		srv.Close()
		return err
	}
	p.resp = srv
	n.serve("resp", srv.Serve)
	n.phase("redis-protocol port", t, "addr", respAddr(p), "socket", respSocket(p), "cluster_mode", rc.ClusterMode)
	return nil
}

// respListeners are the Redis-protocol port's listeners: the TCP one
// (listen opened it), then the Unix socket, created here with its mode.
func (n *Node) respListeners(p *nodeParts) ([]net.Listener, error) {
	var lis []net.Listener
	if p.respLis != nil {
		lis = append(lis, p.respLis)
	}
	if path := n.cfg.RESP.Socket; path != "" {
		ul, err := sockfile.Listen(path, cmp.Or(n.cfg.RESP.SocketMode, 0o660))
		if err != nil {
			return nil, fmt.Errorf("cannot open the Redis-protocol socket: %w", err)
		}
		p.respSock = p.guard.Wrap("resp-socket", ul, netguard.Limits{}) // its server caps connections itself
		lis = append(lis, p.respSock)
	}
	return lis, nil
}

// RESPAddr is the Redis-protocol port's TCP address ("" when it is off or
// before Start).
func (n *Node) RESPAddr() string {
	if p := n.parts.Load(); p != nil && p.resp != nil && p.respLis != nil {
		return p.respLis.Addr().String()
	}
	return ""
}

// RESPSocket is the Redis-protocol socket's path ("" when it is off or
// before Start).
func (n *Node) RESPSocket() string {
	if p := n.parts.Load(); p != nil && p.resp != nil && p.respSock != nil {
		return p.respSock.Addr().String()
	}
	return ""
}

// respAddr is the Redis-protocol port's address for logs: "off" without it.
func respAddr(p *nodeParts) string {
	if p.resp == nil || p.respLis == nil {
		return "off"
	}
	return p.respLis.Addr().String()
}

// respSocket is the Redis-protocol socket's path for logs: "off" without
// it.
func respSocket(p *nodeParts) string {
	if p.resp == nil || p.respSock == nil {
		return "off"
	}
	return p.respSock.Addr().String()
}

// RESPKeyMap maps a Redis key to its namespace, chunk id and placement
// (resp.KeyMap).
type RESPKeyMap = resp.KeyMap

// DefaultRESPKeyMap is LMCache's key layout: namespace before the last
// "@", "kv_bytes" and "metadata" siblings placed together.
func DefaultRESPKeyMap() RESPKeyMap { return resp.DefaultKeyMap() }
