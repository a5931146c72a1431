package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// Config configures a Node. DefaultConfig returns the documented defaults;
// New fills zero durations and limits with them.
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
	// MaintenanceInterval is how often expired stage tokens and leases are
	// swept. Default 5s.
	MaintenanceInterval time.Duration
	// Store configures the local tier; see store.Config for its defaults.
	// Store.DataDir defaults to "./kvring-data".
	Store store.Config
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
		Store:               store.DefaultConfig("./kvring-data"),
		Logger:              slog.Default(),
		Now:                 time.Now,
	}
}

func (c *Config) validate() error {
	def := DefaultConfig()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Store.Logger == nil {
		c.Store.Logger = c.Logger.With("component", "store")
	}
	if c.Membership.Logger == nil {
		c.Membership.Logger = c.Logger.With("component", "membership")
	}
	if c.Replication == 0 {
		c.Replication = def.Replication
	}
	if c.MinReplicas == 0 {
		c.MinReplicas = def.MinReplicas
	}
	if c.MaxBatchChunks == 0 {
		c.MaxBatchChunks = def.MaxBatchChunks
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = def.CommitTimeout
	}
	if c.PeerTimeout == 0 {
		c.PeerTimeout = def.PeerTimeout
	}
	if c.MaintenanceInterval == 0 {
		c.MaintenanceInterval = def.MaintenanceInterval
	}
	if c.Now == nil {
		c.Now = time.Now
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
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid node configuration: %w", err)
	}
	return nil
}
