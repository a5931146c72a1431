package launch

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of NodeConfig.
const (
	// DefaultMemoryLimit is a node's --memory-limit when none is given.
	DefaultMemoryLimit = "256MiB"
	// DefaultReadyTimeout bounds a start: the process started, logged
	// "node ready" and answered 200 on /readyz.
	DefaultReadyTimeout = 60 * time.Second
	// DefaultStopTimeout is how long Stop waits after SIGTERM before it
	// sends SIGKILL.
	DefaultStopTimeout = 30 * time.Second
	// anyPort asks the kernel for a free loopback port.
	anyPort = "127.0.0.1:0"
)

// NodeConfig describes one `kvring serve` process. Zero fields take the
// defaults their comments give.
type NodeConfig struct {
	// Binary is the kvring binary to run. Required.
	Binary string
	// Name labels the node in errors and log lines (default "node").
	Name string
	// Dir is the node's own directory: unless set below, its log file
	// (Dir/kvring.log), data directory (Dir/data) and local socket
	// (Dir/kvring.sock). Required; the caller owns it.
	Dir string
	// LogPath is the file the node's output is appended to, across
	// restarts (default Dir/kvring.log).
	LogPath string
	// DataDir is --data-dir (default Dir/data).
	DataDir string
	// ShmDir is --shm-dir, where the node's segments go. Required; the
	// caller owns it (Start makes one per node under Config.ShmRoot).
	ShmDir string
	// MemoryLimit is --memory-limit (default DefaultMemoryLimit).
	MemoryLimit string
	// GRPCAddr, GossipAddr and AdminAddr are the listen addresses (default
	// 127.0.0.1:0: a free port, held for the node until it listens).
	GRPCAddr, GossipAddr, AdminAddr string
	// RESP serves the Redis protocol on RESPAddr (default 127.0.0.1:0).
	// Without it the node serves none (KVRING_RESP_ADDR is cleared).
	RESP     bool
	RESPAddr string
	// Socket serves the local socket at SocketPath (default
	// Dir/kvring.sock). Without it the node serves none (KVRING_SOCKET is
	// cleared).
	Socket     bool
	SocketPath string
	// Args are more `kvring serve` flags, after the ones above (a flag
	// given twice takes its last value, so Args override them).
	Args []string
	// Env is added to the launcher's environment.
	Env []string
	// Prefix runs the node through a command, e.g. {"ip", "netns", "exec",
	// "ns1"}; it must exec kvring, so that the pid is kvring's.
	Prefix []string
	// ReadyTimeout bounds the start (default DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// StopTimeout bounds Stop's wait after SIGTERM (default
	// DefaultStopTimeout).
	StopTimeout time.Duration
	// Logf, if set, is told what the launcher notices along the way (a
	// port it could not hold, a restart tried again).
	Logf func(format string, args ...any)
}

// withDefaults returns c with its defaults filled in, or an error naming
// the first required field that is missing.
func (c NodeConfig) withDefaults() (NodeConfig, error) {
	switch {
	case c.Binary == "":
		return c, errors.New("launch: NodeConfig.Binary is required")
	case c.Dir == "":
		return c, errors.New("launch: NodeConfig.Dir is required")
	case c.ShmDir == "":
		return c, errors.New("launch: NodeConfig.ShmDir is required")
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Name, "node")
	def(&c.DataDir, c.Dir+"/data")
	def(&c.LogPath, c.Dir+"/kvring.log")
	def(&c.MemoryLimit, DefaultMemoryLimit)
	def(&c.GRPCAddr, anyPort)
	def(&c.GossipAddr, anyPort)
	def(&c.AdminAddr, anyPort)
	def(&c.RESPAddr, anyPort)
	def(&c.SocketPath, c.Dir+"/kvring.sock")
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c, nil
}

// args is the command line: Prefix, the binary, then serve and its flags.
func (c NodeConfig) args() []string {
	a := append([]string(nil), c.Prefix...)
	a = append(a, c.Binary, "serve", "--data-dir", c.DataDir, "--shm-dir", c.ShmDir, "--memory-limit", c.MemoryLimit,
		"--grpc-addr", c.GRPCAddr, "--gossip-addr", c.GossipAddr, "--admin-addr", c.AdminAddr)
	if c.RESP {
		a = append(a, "--resp-addr", c.RESPAddr)
	}
	if c.Socket {
		a = append(a, "--socket", c.SocketPath)
	}
	return append(a, c.Args...)
}

// env is the process's environment: the launcher's, without a local
// socket or Redis port unless asked for (nodes must not share one), then
// Env.
func (c NodeConfig) env(base []string) []string {
	e := append(append([]string(nil), base...), "KVRING_SOCKET=", "KVRING_RESP_ADDR=")
	return append(e, c.Env...)
}

// Config describes a cluster that Start launches: Nodes nodes, the second
// and later joining the first (unless NoJoin).
type Config struct {
	// Binary is the kvring binary. Required.
	Binary string
	// Nodes is how many nodes to start (default 1).
	Nodes int
	// Dir is where each node's directory (Dir/n1, Dir/n2, ...) is made;
	// default a new directory in os.TempDir(). Start removes what it made
	// on Close.
	Dir string
	// ShmRoot is where each node's segment directory is made (default
	// /dev/shm; removed on Close).
	ShmRoot string
	// MemoryLimit, RESP, Socket, Env, Prefix, ReadyTimeout, StopTimeout and
	// Logf are every node's (see NodeConfig).
	MemoryLimit  string
	RESP, Socket bool
	Env          []string
	Prefix       []string
	ReadyTimeout time.Duration
	StopTimeout  time.Duration
	Logf         func(format string, args ...any)
	// Flags are more `kvring serve` flags for every node; NodeFlags[i],
	// when present, are node i's (after Flags).
	Flags     []string
	NodeFlags [][]string
	// LogPrefix, if set, puts node i's log (from 1) at LogPrefix + i +
	// ".log", which Close leaves; by default it is in the node's directory.
	LogPrefix string
	// NoJoin starts every node alone (no --join).
	NoJoin bool
	// RingTimeout bounds the wait until every node sees all Nodes members
	// active (default DefaultReadyTimeout).
	RingTimeout time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Binary == "" {
		return c, errors.New("launch: Config.Binary is required")
	}
	if c.Nodes < 0 || len(c.NodeFlags) > max(c.Nodes, 1) {
		return c, fmt.Errorf("launch: %d nodes with flags for %d", c.Nodes, len(c.NodeFlags))
	}
	if c.Nodes == 0 {
		c.Nodes = 1
	}
	if c.ShmRoot == "" {
		c.ShmRoot = "/dev/shm"
	}
	if c.RingTimeout <= 0 {
		c.RingTimeout = DefaultReadyTimeout
	}
	return c, nil
}
