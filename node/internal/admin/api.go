package admin

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/kvring/kvring/internal/buildinfo"
	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/handoff"
	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/netguard"
	"github.com/kvring/kvring/node/internal/owner"
	"github.com/kvring/kvring/node/internal/resp"
	"github.com/kvring/kvring/node/internal/resp/respcoord"
	"github.com/kvring/kvring/node/internal/security"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/store/disk"
)

// Config is what the admin API reads and acts on: the started node's parts.
// Every field is required unless it says otherwise.
type Config struct {
	Store    *store.Store
	Disk     *disk.Tier // nil: the disk tier is off
	Registry *namespace.Registry
	Owner    *owner.Owner
	Coord    *coord.Coordinator
	Metrics  *metrics.Set
	Member   *membership.Membership
	Mover    *handoff.Mover
	Guard    *netguard.Guard
	// Credentials hold the admin token (nil: none, the API is open).
	Credentials *security.Credentials
	// RESP is the Redis-protocol port and RESPCluster its adapter (nil:
	// the port is off); RESPClusterMode whether it answers as a Redis
	// Cluster.
	RESP            *resp.Server
	RESPCluster     *respcoord.Cluster
	RESPClusterMode bool
	// Build is the node's version (GET /v1/version).
	Build buildinfo.Info
	// AdminActions allows the write actions without an admin token;
	// EnablePprof serves /debug/pprof/.
	AdminActions, EnablePprof bool
	// MetricsHandler serves GET /metrics.
	MetricsHandler http.Handler
	// Ready reports whether the node serves (its lifecycle's flag).
	Ready func() bool
	// Draining is the operator's drain flag, owned by the node (its
	// readiness reads it too); drain and undrain set it.
	Draining *atomic.Bool
	Now      func() time.Time
	Logger   *slog.Logger
}

// API is the admin HTTP API of a started node (Handler) and the read-only
// views it serves (Cluster, RingInfo, Namespaces, Readiness). Safe for
// concurrent use; no view waits for the node's lifecycle lock, so they
// answer while Close drains requests.
type API struct {
	st              *store.Store
	disk            *disk.Tier
	reg             *namespace.Registry
	owner           *owner.Owner
	coord           *coord.Coordinator
	m               *metrics.Set
	member          *membership.Membership
	mover           *handoff.Mover
	guard           *netguard.Guard
	sec             *security.Credentials
	resp            *resp.Server
	respCluster     *respcoord.Cluster
	respClusterMode bool
	build           buildinfo.Info
	adminActions    bool
	pprof           bool
	metricsHandler  http.Handler
	ready           func() bool
	draining        *atomic.Bool
	now             func() time.Time
	log             *slog.Logger
}

// New returns the API over cfg's parts. It does no I/O.
func New(cfg Config) *API {
	return &API{st: cfg.Store, disk: cfg.Disk, reg: cfg.Registry, owner: cfg.Owner, coord: cfg.Coord, m: cfg.Metrics,
		member: cfg.Member, mover: cfg.Mover, guard: cfg.Guard, sec: cfg.Credentials, resp: cfg.RESP,
		respCluster: cfg.RESPCluster, respClusterMode: cfg.RESPClusterMode, build: cfg.Build, adminActions: cfg.AdminActions,
		pprof: cfg.EnablePprof, metricsHandler: cfg.MetricsHandler, ready: cfg.Ready, draining: cfg.Draining, now: cfg.Now,
		log: cfg.Logger}
}

// Stats is /v1/stats: the store's accounting, and the disk tier's under
// "disk" when it is on.
type Stats struct {
	store.Stats
	Disk *disk.Stats `json:"disk,omitempty"`
}

// stats is the node's Stats.
func (a *API) stats() Stats {
	s := Stats{Stats: a.st.Stats()}
	if a.disk != nil {
		ds := a.disk.Stats()
		s.Disk = &ds
	}
	return s
}

// diskError is the disk tier's Health as text ("" when healthy or off).
func (a *API) diskError() string {
	if a.disk == nil {
		return ""
	}
	if err := a.disk.Health(); err != nil {
		return err.Error()
	}
	return ""
}
