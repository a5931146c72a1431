package collectors

import (
	"cmp"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvring/kvring/internal/buildinfo"
	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/services"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// Node is everything a node registers but its parts' own (Build, ActiveVersions, Spread, Disk, Moves, the mover's and the listeners'): the services' instruments,
// the store and cluster views read at scrape time, and the count of
// unreachable peers. members may be nil (no member table).
func Node(svc *services.Services, st *store.Store, members func() []membership.Member, rg func() *ring.Ring) []prometheus.Collector {
	return append(svc.Metrics.Collectors(), newStoreCollector(st), newNamespaceCollector(svc.Registry, st), newClusterCollector(members, rg),
		peersUnreachableGauge(svc.Coord))
}

// peersUnreachableGauge exports how many peers are in an outage now.
func peersUnreachableGauge(c *coord.Coordinator) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvring_peers_unreachable",
		Help: "Peers this node failed to reach and has not reached since."}, func() float64 { return float64(c.Unreachable()) })
}

// Build is kvring_build_info: 1, labelled with the node's build, so
// a dashboard can tell which build each node runs (commit "unknown": the
// binary carries none; commit_time "": unknown).
func Build(b buildinfo.Info) prometheus.Collector {
	commitTime := ""
	if !b.CommitTime.IsZero() {
		commitTime = b.CommitTime.UTC().Format(time.RFC3339)
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvring_build_info",
		Help: "Always 1; the labels name this node's build: version, commit, commit_time, modified (the tree had uncommitted changes) and goversion.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": cmp.Or(b.Commit, "unknown"), "commit_time": commitTime,
			"modified": strconv.FormatBool(b.Modified), "goversion": b.GoVersion}})
	g.Set(1)
	return g
}

// ActiveVersions are kvring_active_version{part}: the version of each
// versioned part this node uses now (the highest every member supports).
func ActiveVersions(active func() membership.ActiveVersions) []prometheus.Collector {
	g := func(part string, v func(membership.ActiveVersions) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvring_active_version",
			Help:        "Version of each versioned part (placement, wire) this node uses: the highest every member supports.",
			ConstLabels: prometheus.Labels{"part": part}}, func() float64 { return float64(v(active())) })
	}
	return []prometheus.Collector{g("placement", func(a membership.ActiveVersions) int { return a.Placement }),
		g("wire", func(a membership.ActiveVersions) int { return a.Wire })}
}
