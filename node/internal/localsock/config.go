package localsock

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/kvring/kvring/node/internal/netguard"
)

// MaxMessageBytes is the largest request body accepted: 256 MiB, as
// Vineyard's own server. A longer frame gets an error reply and the
// connection is closed (the stream cannot be resynchronised).
const MaxMessageBytes = 256 << 20

// Config configures a Server. Zero fields take the documented defaults.
type Config struct {
	// Path is the socket file. Required.
	Path string
	// Mode is the socket file's permission bits. Default 0660: the Vineyard
	// clients check they can write the file before connecting.
	Mode os.FileMode
	// Store holds the blobs. Required.
	Store Store
	// Cluster serves the kvring extensions that reach the cluster (publish,
	// lookup, get, namespace registration). Default nil: those requests
	// are answered with error code 6 (NotImplemented).
	Cluster Cluster
	// InstanceID is the Vineyard instance id this node reports (register,
	// blob metadata, cluster_meta). Default 0.
	InstanceID uint64
	// NodeName names the node in cluster_meta (hostname, nodename). Default
	// the host name.
	NodeName string
	// RPCEndpoint is reported as rpc_endpoint. Default "".
	RPCEndpoint string
	// MaxConns is the most connections served at once; more are answered
	// with one error reply and closed. Default 4096.
	MaxConns int
	// WriteTimeout is how long one reply may take to write: a client that
	// does not read its replies for that long is disconnected. Default 10s.
	WriteTimeout time.Duration
	// FrameTimeout is how long the rest of a request may take to arrive once
	// its length has been read. Default 30s. (An idle connection between
	// requests is never timed out: engines keep theirs open.)
	FrameTimeout time.Duration
	// NameWait bounds a get_name request that asks to wait for the name.
	// Default 30s.
	NameWait time.Duration
	// CallTimeout bounds one extension call to the cluster. Default 30s.
	CallTimeout time.Duration
	// MaxUnsealedBytes caps the bytes of blobs created and not yet sealed
	// (or deleted), shared among the socket's clients (processes) by
	// package fairshare's rule: one client alone may hold three quarters,
	// and another always finds a quarter free. A create past it is answered
	// NotEnoughMemory. Default 0: no cap (the node passes its staged-bytes
	// budget).
	MaxUnsealedBytes int64
	// clientName names a connection's client (default clientOf: its
	// process); tests name each connection apart, as their connections all
	// come from one process.
	clientName func(nc *net.UnixConn, seq uint64) string
	// Logger receives connection errors. Default slog.Default().
	Logger *slog.Logger
	// Guard keeps the accept loop alive when descriptors run out: it backs
	// off and retries, counts the failures and reports the socket starved
	// meanwhile (listener "localsock"). Default: a Guard of the server's own,
	// whose metrics nobody registers, closed by the server's Close.
	Guard *netguard.Guard
}

// DefaultMode is the default permission of the socket file.
const DefaultMode os.FileMode = 0o660

func (c *Config) setDefaults() {
	if c.Mode == 0 {
		c.Mode = DefaultMode
	}
	if c.NodeName == "" {
		c.NodeName, _ = os.Hostname()
	}
	if c.MaxConns == 0 {
		c.MaxConns = 4096
	}
	if c.clientName == nil {
		c.clientName = clientOf
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.FrameTimeout == 0 {
		c.FrameTimeout = 30 * time.Second
	}
	if c.NameWait == 0 {
		c.NameWait = 30 * time.Second
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Guard == nil {
		c.Guard = netguard.New(c.Logger)
	}
}

// validate fills the defaults and reports every unusable field.
func (c *Config) validate() error {
	c.setDefaults()
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("socket path is required"))
	}
	if c.Store == nil {
		errs = append(errs, errors.New("store is required"))
	}
	if c.Mode&^os.ModePerm != 0 {
		errs = append(errs, fmt.Errorf("socket mode %v has bits other than permissions", c.Mode))
	}
	if c.MaxConns < 0 || c.WriteTimeout < 0 || c.FrameTimeout < 0 || c.NameWait < 0 || c.CallTimeout < 0 {
		errs = append(errs, errors.New("limits and timeouts must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid local socket configuration: %w", err)
	}
	return nil
}
