package resp

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"time"

	"github.com/kvring/kvring/internal/buildinfo"
	"github.com/kvring/kvring/store"
)

// Config configures a Server. Zero fields take the documented defaults.
type Config struct {
	// Store holds the values while they are written (blobs) and the
	// chunks this node serves in place. Required.
	Store *store.Store
	// Cluster runs writes and reads across the cluster. Required.
	Cluster Cluster
	// KeyMap maps keys to namespaces and placement. Default
	// DefaultKeyMap().
	KeyMap KeyMap
	// ClusterMode answers as a Redis Cluster: CLUSTER SLOTS, SHARDS and
	// NODES describe kvring's placement as slots (Cluster.Slots), a key is
	// placed by its slot, and a command whose key this node does not own is
	// answered -MOVED to the owner. Off: the node answers every key itself,
	// as a single Redis does. It must be the same on every node. Default off.
	ClusterMode bool
	// TLS, when set, serves the port over TLS with this configuration.
	TLS *tls.Config
	// NodeID names this node in INFO and CLIENT INFO.
	NodeID string
	// Build is kvring's build, reported in INFO server beside the Redis
	// version clients check (kvring_version, kvring_git_sha1,
	// kvring_git_dirty, kvring_commit_time, as Redis reports redis_git_sha1).
	// Default: this binary's, as buildinfo.Read finds it without a stamp.
	Build buildinfo.Info
	// MaxConns is the most connections served at once; more are answered
	// "-ERR max number of clients reached" and closed. Default 10000
	// (Redis's maxclients).
	MaxConns int
	// IdleTimeout closes a connection that sends no command for this long
	// (clients reconnect on their next command). Default 5m; negative:
	// never.
	IdleTimeout time.Duration
	// CommandTimeout is how long the rest of a command may take to arrive
	// once its first byte has: a client that trickles bytes is
	// disconnected. Default 30s.
	CommandTimeout time.Duration
	// WriteTimeout: a client that does not read its replies for this long
	// is disconnected (each write call of up to 4 MiB gets this long, so a
	// client that reads steadily is never cut off). Default 10s.
	WriteTimeout time.Duration
	// CallTimeout bounds one command's work in the cluster. Default 30s.
	CallTimeout time.Duration
	// MaxArgs is the most arguments of one command. Default 65536.
	MaxArgs int
	// MaxArgLen is the longest argument that is not a value (keys, options).
	// Default 64 KiB.
	MaxArgLen int
	// MaxRequestBytes bounds the arguments of one command that are not
	// values, and the values of one command together. Default 256 MiB for
	// values and 16 MiB for the rest.
	MaxRequestBytes int64
	// MaxClientMemory bounds the heap all connections hold together for
	// arguments that are not values (past 64 KiB a connection) and for
	// queued replies whose bytes are not in shared memory. A request that
	// would pass it is answered -OOM and its connection closed; a reply
	// waits while its connection has others queued. Default
	// DefaultMaxClientMemory; negative: no bound.
	MaxClientMemory int64
	// MaxInline is the longest inline (telnet-style) command. Default 64 KiB.
	MaxInline int
	// ReplyBuffer is how many bytes of small replies are gathered before
	// they are queued for writing. Default 64 KiB.
	ReplyBuffer int
	// MaxValueBytes bounds the bytes of SET values being received (read
	// into shared memory before their command runs) by all connections
	// together, shared among clients (valueShares: one client alone may
	// hold three quarters). A command's first value past it, or past its
	// client's share, waits for room until the command's deadline
	// (CommandTimeout); then, and at once for a value that can never fit,
	// it is read past and answered -OOM. Default 0: no bound (the node
	// passes its staged-bytes budget).
	MaxValueBytes int64
	// MaxReplyQueue bounds the reply bytes queued for a connection that has
	// not read them yet (values this node holds are queued where they are,
	// in shared memory; others on the heap). Past it the connection reads
	// no more requests until the client reads. Default 64 MiB.
	MaxReplyQueue int64
	// ExistsLease is how long a key that EXISTS (or SET NX/XX, SETNX,
	// MSETNX) found held stays pinned against eviction, so that a GET
	// that follows within it finds it (LMCache asks EXISTS for a prompt's
	// chunks, then GETs them). Negative: no lease (EXISTS is answered from
	// this node's index where it holds the key). Default
	// DefaultExistsLease.
	ExistsLease time.Duration
	// SentinelMaster is the master name the port answers SENTINEL for, as
	// a Redis Sentinel that monitors one master (cmd_sentinel.go): the
	// name clients pass to master_for / GET-MASTER-ADDR-BY-NAME. Default
	// DefaultSentinelMaster.
	SentinelMaster string
	// Logger receives connection errors. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of the rate-limited WARN lines (refused writes,
	// keys written to the default namespace). Default time.Now.
	Now func() time.Time
}

// The defaults of the settings kvring serve has flags for (node.RESPConfig).
const (
	DefaultMaxConns       = 10000
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultCommandTimeout = 30 * time.Second
	// DefaultMaxClientMemory is MaxClientMemory's default: 512 MiB.
	DefaultMaxClientMemory = 512 << 20
	// DefaultExistsLease is ExistsLease's default: 2 s (docs/resp.md says
	// why).
	DefaultExistsLease = 2 * time.Second
	// DefaultSentinelMaster is SentinelMaster's default.
	DefaultSentinelMaster = "kvring"
)

func (c *Config) setDefaults() {
	c.KeyMap.setDefaults()
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.IdleTimeout, DefaultIdleTimeout)
	def(&c.CommandTimeout, DefaultCommandTimeout)
	def(&c.WriteTimeout, 10*time.Second)
	def(&c.CallTimeout, 30*time.Second)
	def(&c.ExistsLease, DefaultExistsLease)
	if c.SentinelMaster == "" {
		c.SentinelMaster = DefaultSentinelMaster
	}
	if c.Build.Version == "" {
		c.Build = buildinfo.Read(buildinfo.Stamp{})
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxArgs == 0 {
		c.MaxArgs = 65536
	}
	if c.MaxArgLen == 0 {
		c.MaxArgLen = 64 << 10
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = 256 << 20
	}
	if c.MaxClientMemory == 0 {
		c.MaxClientMemory = DefaultMaxClientMemory
	}
	if c.MaxInline == 0 {
		c.MaxInline = 64 << 10
	}
	if c.ReplyBuffer == 0 {
		c.ReplyBuffer = 64 << 10
	}
	if c.MaxReplyQueue == 0 {
		c.MaxReplyQueue = 64 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

func (c *Config) validate() error {
	c.setDefaults()
	switch {
	case c.Store == nil:
		return errors.New("resp: Config.Store is required")
	case c.Cluster == nil:
		return errors.New("resp: Config.Cluster is required")
	case c.MaxConns < 0 || c.MaxArgs < 1 || c.MaxArgLen < 1 || c.MaxInline < 1 || c.MaxRequestBytes < 1:
		return errors.New("resp: limits must be positive")
	case c.CommandTimeout < 0 || c.WriteTimeout < 0 || c.CallTimeout < 0:
		return errors.New("resp: the command, write and call timeouts must be positive")
	}
	return c.KeyMap.validate()
}

func (c *Config) limits() limits {
	return limits{maxArgs: c.MaxArgs, maxArgLen: c.MaxArgLen, maxArgBytes: int(min(c.MaxRequestBytes, 16<<20)),
		maxInline: c.MaxInline, maxValue: c.Store.MaxChunkSize(), maxValues: c.MaxRequestBytes}
}
