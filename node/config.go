package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kvring/kvring/internal/buildinfo"
	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/handoff"
	"github.com/kvring/kvring/node/internal/localsock"
	"github.com/kvring/kvring/node/internal/resp"
	"github.com/kvring/kvring/node/internal/spread"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/store/disk"
)

// Config configures a Node. DefaultConfig returns the documented defaults,
// the one place the node's own defaults are written (settings of the node's
// parts take their defaults from those packages: store.DefaultConfig,
// membership.DefaultConfig, handoff, spread, resp, localsock); New fills
// every zero field with them (setDefaults).
type Config struct {
	// GRPCAddr is the listen address of the engine-facing Cache service and
	// the node-to-node Peer service. Default ":9600". Port 0 picks a free
	// port (see Node.GRPCAddr).
	GRPCAddr string
	// AdvertiseGRPCAddr is the gRPC address peers reach this node at.
	// Default "": the listener's address, with an unspecified host replaced
	// by the host gossip advertises.
	AdvertiseGRPCAddr string
	// AdminAddr is the HTTP listen address for /metrics, /healthz, /readyz and /v1/*.
	// Default ":9602". Port 0 picks a free port (see Node.AdminAddr).
	AdminAddr string
	// EnablePprof serves Go's runtime profiles (net/http/pprof) at
	// /debug/pprof/ on the admin address. Default false: profiles expose
	// internals and a CPU profile costs CPU while it runs, so an operator
	// turns them on to investigate.
	EnablePprof bool
	// Socket configures the local Unix socket (Vineyard IPC and kvring's
	// extensions; docs/vineyard.md). Default: off (Socket.Path ""). The
	// serve command turns it on at kvring.sock in Store.DataDir, so every
	// node has its own.
	Socket SocketConfig
	// RESP configures the Redis-protocol port (docs/resp.md). Default:
	// off.
	RESP RESPConfig
	// Membership configures gossip (address, seeds, ring settings). NodeID,
	// GRPCAddr, AdminAddr and OnRingChange are filled by the node. Default
	// membership.DefaultConfig() with Ring.ReplicationFactor 3; a zero
	// Membership takes that default.
	Membership membership.Config
	// Replication and MinReplicas are the replication factor and the
	// fewest holders for a write to count as stored, for namespaces whose
	// first client does not choose. Default 1 and 1. Replication may not
	// exceed Membership.Ring.ReplicationFactor.
	Replication, MinReplicas int
	// MaxBatchChunks is the most chunks one call may carry. Default 8192
	// (a 128k-token prompt at 16 tokens a chunk).
	MaxBatchChunks int
	// CommitTimeout bounds the commit and abort calls of a two-phase write
	// and a namespace registration's broadcast. Default 10s.
	CommitTimeout time.Duration
	// PeerTimeout bounds each exchange with one owner (a prepare step, a
	// frame, a commit, a Has or a chunk of a Fetch), so an owner that hangs is
	// skipped within the engine's deadline instead of failing the call.
	// Default 3s.
	PeerTimeout time.Duration
	// CoalescePeerHas merges a coordinator's concurrent lookups of the same
	// owner (unpinned Has requests of one namespace) into one peer call
	// while a call to that owner is in flight. It halved the Has calls at
	// 16 concurrent lookups per node but added a wait at 4 to 8
	// (docs/benchmarks.md). Default false: one call per request.
	CoalescePeerHas bool
	// AdminActions allows the admin API's write actions (drain, undrain,
	// forget a member, drop a namespace, evict a chunk) on a node without
	// an admin token.
	// With an admin token they are allowed to whoever presents it. Default
	// false: without a token the admin API only reads.
	AdminActions bool
	// MaxNamespaces is the most namespaces the cluster registers; one more
	// is refused with ResourceExhausted. Default 1024.
	MaxNamespaces int
	// PutIdleTimeout ends a Put whose engine sends no message for this long,
	// before its begin message or while the node waits for its chunk bytes:
	// the call fails with DeadlineExceeded and its staged chunks are freed at
	// once, so a stalled engine holds no memory and no stream. Default 10s;
	// negative: no limit.
	PutIdleTimeout time.Duration
	// PutMinRate ends a Put whose chunk bytes, once PutIdleTimeout has
	// passed since the node began waiting for them, arrive slower than this
	// many bytes per second on average (DeadlineExceeded, its staged chunks
	// freed): a trickling engine cannot hold its reservations for the whole
	// stage lease. Default coord.DefaultMinPutRate (256 KiB/s); negative:
	// no minimum (the flag takes sizes: 1 is practically none).
	PutMinRate int64
	// PutMaxAwaitingBegin is how many of one client's Puts the node waits
	// on for their begin message at once; more wait for one of those to
	// begin or end, and fail with ResourceExhausted (counted in
	// kvring_put_begin_refused_total) if none does within their begin
	// deadline. A client is named as for its shares of the budgets.
	// Default coord.DefaultMaxAwaitingBegin (64); negative: no bound.
	PutMaxAwaitingBegin int
	// HandoffRate caps the bytes per second this node copies to other nodes
	// when it hands chunks off (after a ring change, while it drains) or
	// re-replicates them, so foreground traffic keeps its latency; each
	// chunk counts 32 KiB more than its size (its fixed cost). Default
	// 256 MiB/s; negative: no cap.
	HandoffRate int64
	// HandoffRetry is how soon a hand-off pass that left work undone (an
	// owner unreachable, a copy refused) runs again. Default 5s.
	HandoffRetry time.Duration
	// HandoffSweep is how often a hand-off pass runs with nothing prompting
	// it, to re-replicate chunks after changes no ring change shows.
	// Default 1m; negative: only on ring changes.
	HandoffSweep time.Duration
	// Spread configures hot-group spreading: a group of a namespace placed
	// by groups that reaches its primary owner in Spread.Threshold lookups
	// within Spread.Window is copied to the other members of its key's
	// spread set (its owners, then members picked by keys derived from it;
	// Spread.Width members in all), who keep it for Spread.TTL after it
	// was last found hot; lookups and gets of the group then go to any of
	// them (docs/placement.md).
	Spread SpreadConfig
	// MaintenanceInterval is how often expired stage tokens and leases are
	// swept. Default 5s.
	MaintenanceInterval time.Duration
	// MaxStreamsPerConn is the most calls (streams) one gRPC connection may
	// have open at once; it is advertised to the client (HTTP/2
	// SETTINGS_MAX_CONCURRENT_STREAMS), which queues further calls until
	// one ends, and a client that ignores it has the extra streams refused.
	// It bounds what one engine or peer connection can pin in handler
	// goroutines and stream buffers. Default 256.
	MaxStreamsPerConn int
	// MaxRecvMsgBytes is the largest gRPC message the node accepts. It
	// must hold a data frame (1 MiB and its header) and a call naming
	// MaxBatchChunks chunks (about 64 bytes each); New checks both.
	// Default 4 MiB.
	MaxRecvMsgBytes int
	// KeepaliveMinTime is the shortest interval at which clients may ping
	// the gRPC server; a client that pings more often is sent GOAWAY
	// (ENHANCE_YOUR_CALM, "too_many_pings") and disconnected. Pings are
	// allowed on connections without calls, since nodes ping idle peer
	// connections to notice a vanished peer. At most 10s, the interval at
	// which a node pings its peers. Default 5s.
	KeepaliveMinTime time.Duration
	// KeepaliveTime and KeepaliveTimeout: after KeepaliveTime without
	// activity on a connection the server pings the client, and closes the
	// connection when no answer comes within KeepaliveTimeout, so the
	// resources of clients that vanished are freed. Defaults 30s and 10s.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MaxConnIdle closes (GOAWAY, then close) a gRPC connection that has had
	// no call in flight for this long. Engines' connections are never idle
	// (the SDK health-checks its node every second), and a peer connection
	// closed this way is reopened on its next call. Default 30m; negative:
	// never.
	MaxConnIdle time.Duration
	// MaxConnAge, when positive, closes a gRPC connection once it is this
	// old (±10 %), after MaxConnAgeGrace for the calls in flight; clients
	// reconnect. Default 0: never. Long-lived connections are the normal
	// case here: clients route by the ring, not through a load balancer
	// that age limits would help spread connections over. MaxConnAgeGrace
	// defaults to 1m.
	MaxConnAge, MaxConnAgeGrace time.Duration
	// ClientGoneGrace is how long a client's lookup leases outlive its last
	// gRPC connection to the node that granted them: a client named by its
	// token or its remote address that names itself again on a new
	// connection within it (a reconnect) keeps them; after it, they are
	// ended on every owner. A loopback client without a token is named by
	// its connection, which no reconnect can carry, so its leases end at
	// once. Default DefaultClientGoneGrace; negative: at once for every
	// client.
	ClientGoneGrace time.Duration
	// AdminReadTimeout bounds reading a whole admin request (headers and
	// body). Default 30s; negative: no limit. (Headers alone have 10s.)
	AdminReadTimeout time.Duration
	// AdminWriteTimeout bounds an admin request from the end of its headers
	// to the end of the reply. It must exceed the longest profile asked
	// for: /debug/pprof/profile takes 30s unless ?seconds= says otherwise,
	// and net/http/pprof refuses durations at or past this timeout.
	// Default 2m; negative: no limit.
	AdminWriteTimeout time.Duration
	// AdminIdleTimeout closes an admin keep-alive connection idle for this
	// long. Default 2m (longer than common scrape intervals, so a
	// Prometheus server keeps its connection).
	AdminIdleTimeout time.Duration
	// AdminMaxHeaderBytes bounds an admin request's headers. Default 64 KiB.
	AdminMaxHeaderBytes int
	// Conns caps the gRPC port's connections, per node and per remote
	// address; see ConnLimitsConfig for the defaults.
	Conns ConnLimitsConfig
	// Security names the node's credentials (TLS, cluster key, tokens, gossip
	// and admin keys); see SecurityConfig. Default: none, as open as before.
	Security SecurityConfig
	// Store configures the local tier; see store.Config for its defaults.
	// Store.DataDir defaults to "./kvring-data".
	Store store.Config
	// Disk configures the disk tier under the store (store/disk; its
	// defaults are disk.Config's). Off while Disk.Dir is empty. The node
	// opens it before the store and closes it after (disk.go).
	Disk disk.Config
	// Build is this node's version, commit and commit time: gossiped to the
	// other members (Membership.Build, unless set), served by the admin API
	// (GET /v1/version, /v1/cluster), INFO server on the Redis-protocol port
	// and the kvring_build_info metric. Default: this binary's, as
	// buildinfo.Read finds it without a stamp (the serve command passes the
	// stamp the linker set).
	Build buildinfo.Info
	// Logger receives the node's logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the node's Prometheus metrics (names prefixed
	// kvring_) when it starts; Close unregisters them. Nodes that share a
	// registerer must tell their metrics apart, e.g. with
	// prometheus.WrapRegistererWith and a node label. Default: a fresh
	// registry the node owns, with the Go runtime and process collectors.
	Registerer prometheus.Registerer
	// Gatherer is what the admin server serves at GET /metrics. Default: the
	// Registerer when it is also a Gatherer (as a *prometheus.Registry is);
	// required otherwise.
	Gatherer prometheus.Gatherer
	// Now is the node's one clock: the store's stage and pin leases
	// (Store.Now, unless set), the coordinator's lookup-lease records, the
	// owner's pin records and the membership's settle window
	// (Membership.Now, unless set). Default time.Now.
	Now func() time.Time
}

// DefaultConfig returns a Config with every default filled in.
func DefaultConfig() Config {
	m := membership.DefaultConfig()
	m.Ring.ReplicationFactor = 3
	return Config{
		GRPCAddr:            ":9600",
		AdminAddr:           ":9602",
		Membership:          m,
		Replication:         1,
		MinReplicas:         1,
		MaxBatchChunks:      8192,
		CommitTimeout:       10 * time.Second,
		PeerTimeout:         3 * time.Second,
		MaintenanceInterval: 5 * time.Second,
		PutIdleTimeout:      10 * time.Second,
		PutMinRate:          coord.DefaultMinPutRate,
		PutMaxAwaitingBegin: coord.DefaultMaxAwaitingBegin,
		HandoffRate:         handoff.DefaultRate,
		HandoffRetry:        handoff.DefaultRetry,
		HandoffSweep:        handoff.DefaultSweep,
		Spread: SpreadConfig{Threshold: spread.DefaultThreshold, Window: spread.DefaultWindow,
			TTL: spread.DefaultTTL},
		MaxNamespaces:       1024,
		MaxStreamsPerConn:   256,
		MaxRecvMsgBytes:     4 << 20,
		KeepaliveMinTime:    5 * time.Second,
		KeepaliveTime:       30 * time.Second,
		KeepaliveTimeout:    10 * time.Second,
		MaxConnIdle:         30 * time.Minute,
		MaxConnAgeGrace:     time.Minute,
		ClientGoneGrace:     DefaultClientGoneGrace,
		AdminReadTimeout:    30 * time.Second,
		AdminWriteTimeout:   2 * time.Minute,
		AdminIdleTimeout:    2 * time.Minute,
		AdminMaxHeaderBytes: 64 << 10,
		Socket:              SocketConfig{Mode: localsock.DefaultMode},
		RESP: RESPConfig{KeyMap: DefaultRESPKeyMap(), SocketMode: 0o660, MaxConns: resp.DefaultMaxConns, IdleTimeout: resp.DefaultIdleTimeout,
			MaxClientMemory: resp.DefaultMaxClientMemory,
			CommandTimeout:  resp.DefaultCommandTimeout, ExistsLease: resp.DefaultExistsLease,
			SentinelMaster: resp.DefaultSentinelMaster},
		Store:  store.DefaultConfig("./kvring-data"),
		Logger: slog.Default(),
		Now:    time.Now,
	}
}

// SpreadConfig configures hot-group spreading (Config.Spread).
type SpreadConfig struct {
	// Threshold is how many lookups of one group within Window make it hot.
	// Default 32; negative: no group is ever spread.
	Threshold int
	// Window is the counting window. Default 10s.
	Window time.Duration
	// Width is how many members hold a hot group, its owners included (at
	// most the cluster's size). Default 0: it grows with the cluster,
	// ring.SpreadWidth of the ring's size (8 up to 64 members, one in 8
	// above), so a hot group's members stay about as busy at any size.
	Width int
	// TTL is how long the members keep a spread group after it was last
	// found hot (at most 1h). Default 2m.
	TTL time.Duration
}

// setDefaults fills every zero field of c with DefaultConfig's value, and
// the parts' loggers and clock with the node's. validate calls it first.
func (c *Config) setDefaults() {
	def := DefaultConfig()
	if c.Logger == nil {
		c.Logger = def.Logger
	}
	if c.Store.Logger == nil {
		c.Store.Logger = c.Logger.With("component", "store")
	}
	if c.Membership.Logger == nil {
		c.Membership.Logger = c.Logger.With("component", "membership")
	}
	if c.Now == nil {
		c.Now = def.Now
	}
	if c.Build.Version == "" {
		c.Build = buildinfo.Read(buildinfo.Stamp{})
	}
	if c.Membership.Build == (membership.Build{}) {
		c.Membership.Build = membership.Build{Version: c.Build.Version, Commit: c.Build.Commit}
	}
	if c.Store.Now == nil {
		c.Store.Now = c.Now
	}
	if c.Membership.Now == nil {
		c.Membership.Now = c.Now
	}
	if c.Membership.Ring == (ring.Config{}) {
		c.Membership.Ring = def.Membership.Ring
	}
	if c.HandoffRetry < 0 {
		c.HandoffRetry = 0 // "no wait" is not a setting: the default
	}
	for _, f := range []struct{ v, def *int }{
		{&c.Replication, &def.Replication}, {&c.MinReplicas, &def.MinReplicas},
		{&c.MaxBatchChunks, &def.MaxBatchChunks}, {&c.MaxNamespaces, &def.MaxNamespaces},
		{&c.MaxStreamsPerConn, &def.MaxStreamsPerConn}, {&c.MaxRecvMsgBytes, &def.MaxRecvMsgBytes},
		{&c.AdminMaxHeaderBytes, &def.AdminMaxHeaderBytes},
		{&c.Spread.Threshold, &def.Spread.Threshold},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	for _, f := range []struct{ v, def *time.Duration }{
		{&c.CommitTimeout, &def.CommitTimeout}, {&c.PeerTimeout, &def.PeerTimeout},
		{&c.MaintenanceInterval, &def.MaintenanceInterval}, {&c.PutIdleTimeout, &def.PutIdleTimeout},
		{&c.HandoffRetry, &def.HandoffRetry}, {&c.HandoffSweep, &def.HandoffSweep},
		{&c.Spread.Window, &def.Spread.Window}, {&c.Spread.TTL, &def.Spread.TTL},
		{&c.KeepaliveMinTime, &def.KeepaliveMinTime}, {&c.KeepaliveTime, &def.KeepaliveTime},
		{&c.KeepaliveTimeout, &def.KeepaliveTimeout}, {&c.MaxConnIdle, &def.MaxConnIdle},
		{&c.MaxConnAgeGrace, &def.MaxConnAgeGrace}, {&c.ClientGoneGrace, &def.ClientGoneGrace}, {&c.AdminReadTimeout, &def.AdminReadTimeout},
		{&c.AdminWriteTimeout, &def.AdminWriteTimeout}, {&c.AdminIdleTimeout, &def.AdminIdleTimeout},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if c.HandoffRate == 0 {
		c.HandoffRate = def.HandoffRate
	}
	if c.PutMinRate == 0 {
		c.PutMinRate = def.PutMinRate
	}
	if c.PutMaxAwaitingBegin == 0 {
		c.PutMaxAwaitingBegin = def.PutMaxAwaitingBegin
	}
}

func (c *Config) validate() error {
	c.setDefaults()
	var errs []error
	if c.Registerer == nil && c.Gatherer == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		c.Registerer, c.Gatherer = reg, reg
	}
	if c.Gatherer == nil {
		if g, ok := c.Registerer.(prometheus.Gatherer); ok {
			c.Gatherer = g
		}
	}
	if c.Registerer == nil || c.Gatherer == nil {
		errs = append(errs, errors.New("metrics: set both Registerer and Gatherer, or only a Registerer that is also a Gatherer, or neither"))
	}
	if err := c.Store.Validate(); err != nil { // fills the store's defaults too
		errs = append(errs, err)
	}
	for _, a := range []struct{ name, addr string }{{"gRPC", c.GRPCAddr}, {"admin", c.AdminAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s address %q: %w", a.name, a.addr, err))
		}
	}
	if c.AdvertiseGRPCAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertiseGRPCAddr); err != nil {
			errs = append(errs, fmt.Errorf("advertised gRPC address %q: %w", c.AdvertiseGRPCAddr, err))
		}
	}
	if c.MaxBatchChunks < 1 {
		errs = append(errs, fmt.Errorf("max batch must be positive, got %d", c.MaxBatchChunks))
	}
	if c.Membership.Ring.ReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("ring replication factor must be positive, got %d", c.Membership.Ring.ReplicationFactor))
	}
	if c.Replication < 1 || c.Replication > c.Membership.Ring.ReplicationFactor {
		errs = append(errs, fmt.Errorf("replication must be in [1, %d] (the ring's replication factor), got %d",
			c.Membership.Ring.ReplicationFactor, c.Replication))
	}
	if c.MinReplicas < 1 || c.MinReplicas > c.Replication {
		errs = append(errs, fmt.Errorf("min replicas must be in [1, replication=%d], got %d", c.Replication, c.MinReplicas))
	}
	errs = append(errs, c.Spread.check()...)
	errs = append(errs, c.checkLimits()...)
	errs = append(errs, c.Security.Validate()...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid node configuration: %w", err)
	}
	return nil
}

// check reports the spread settings that cannot work (defaults filled in).
func (s *SpreadConfig) check() []error {
	switch {
	case s.Window < 0:
		return []error{fmt.Errorf("invalid spread window %s: must be positive", s.Window)}
	case s.Width < 0:
		return []error{fmt.Errorf("invalid spread width %d: must not be negative (0: grows with the cluster)", s.Width)}
	case s.TTL < 0 || s.TTL > spread.MaxTTL:
		return []error{fmt.Errorf("invalid spread TTL %s: must be positive and at most %s", s.TTL, spread.MaxTTL)}
	}
	return nil
}
