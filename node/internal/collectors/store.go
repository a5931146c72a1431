package collectors

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// storeCollector exports the store's own accounting: every value comes from
// one store.Stats snapshot taken at scrape time, so the gauges are exactly
// what the store counts (no second bookkeeping that could drift), and the
// store's counters, which only go up, are exported as counters. Safe for
// concurrent use; a scrape takes the store's lock briefly.
type storeCollector struct {
	st *store.Store

	limit, used, chunks, payload, stagedChunks, stagedBytes, pinned *prometheus.Desc
	retainedFree, resident, segments                                *prometheus.Desc
	evictions, rejections, checksumErrors, stageExpired             *prometheus.Desc
	stages, seals, gets, hits                                       *prometheus.Desc
	catalogErrors, segmentsLost, healthy, pathsSkipped              *prometheus.Desc
	pinnedBytes, pinLimit                                           *prometheus.Desc
}

func newStoreCollector(st *store.Store) *storeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("kvring_store_"+name, help, labels, nil)
	}
	return &storeCollector{
		st:             st,
		limit:          d("limit_bytes", "The store's memory budget."),
		used:           d("used_bytes", "Slot bytes of staged, sealed and dying chunks (payload plus allocator waste); never above the limit."),
		chunks:         d("chunks", "Sealed (readable) chunks held."),
		payload:        d("payload_bytes", "Payload bytes of the sealed chunks."),
		stagedChunks:   d("staged_chunks", "Staged (not yet readable) writes."),
		stagedBytes:    d("staged_bytes", "Payload bytes of the staged writes."),
		pinned:         d("pinned_chunks", "Sealed chunks pinned by a lookup lease."),
		retainedFree:   d("retained_free_bytes", "Free slot bytes whose pages stay resident for reuse."),
		resident:       d("resident_bytes", "Memory the kernel has allocated to the store's segments."),
		segments:       d("segments", "Shared-memory segments."),
		evictions:      d("evictions_total", "Chunks that left the store, by reason.", "reason"),
		rejections:     d("rejections_total", "Chunks the store refused to admit, by reason.", "reason"),
		checksumErrors: d("checksum_errors_total", "Reads whose bytes failed their checksum."),
		stageExpired:   d("stage_expired_total", "Staged writes freed because their lease ran out."),
		stages:         d("stages_total", "Writes staged."),
		seals:          d("seals_total", "Writes sealed (made readable)."),
		gets:           d("gets_total", "Reads of the local store."),
		hits:           d("hits_total", "Reads of the local store that found their chunk."),
		catalogErrors: prometheus.NewDesc("kvring_catalog_errors_total",
			"Catalog writes that failed (each is retried; readiness is off while they fail).", nil, nil),
		segmentsLost: d("segments_lost_total", "Segment files found deleted or truncated under the running store."),
		pathsSkipped: d("segment_paths_skipped_total", "Segment ids skipped because a file the store did not create was at their path."),
		pinnedBytes:  d("pinned_bytes", "Slot bytes of the chunks pinned by lookup leases."),
		pinLimit:     d("pin_limit_bytes", "Most bytes lookup leases may pin at once; a pin beyond it is refused."),
		healthy:      d("healthy", "1 while the store keeps its promises (catalog writable, no segment lost), else 0; readiness follows it."),
	}
}

// Reasons exported even before they first happen, so their series exist.
var (
	evictionReasons  = []string{store.ReasonPolicy, store.ReasonExplicit, store.ReasonChecksum, store.ReasonLost}
	rejectionReasons = []string{store.ReasonPolicy, store.ReasonNoSpace}
)

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.limit, c.used, c.chunks, c.payload, c.stagedChunks, c.stagedBytes, c.pinned,
		c.retainedFree, c.resident, c.segments, c.evictions, c.rejections, c.checksumErrors, c.stageExpired,
		c.stages, c.seals, c.gets, c.hits, c.catalogErrors, c.segmentsLost, c.healthy, c.pinnedBytes, c.pinLimit, c.pathsSkipped} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.st.Stats()
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(c.limit, s.LimitBytes)
	gauge(c.used, s.UsedBytes)
	gauge(c.chunks, s.Chunks)
	gauge(c.payload, s.PayloadBytes)
	gauge(c.stagedChunks, s.StagedChunks)
	gauge(c.stagedBytes, s.StagedBytes)
	gauge(c.pinned, s.PinnedChunks)
	gauge(c.retainedFree, s.RetainedFreeBytes)
	gauge(c.resident, s.ResidentBytes)
	gauge(c.segments, int64(s.Segments))
	for _, r := range reasonsOf(evictionReasons, s.Evictions) {
		counter(c.evictions, s.Evictions[r], r)
	}
	for _, r := range reasonsOf(rejectionReasons, s.Rejections) {
		counter(c.rejections, s.Rejections[r], r)
	}
	counter(c.checksumErrors, s.ChecksumErrors)
	counter(c.stageExpired, s.StageExpired)
	counter(c.stages, s.Stages)
	counter(c.seals, s.Seals)
	counter(c.gets, s.Gets)
	counter(c.hits, s.Hits)
	counter(c.catalogErrors, s.CatalogErrors)
	counter(c.segmentsLost, s.SegmentsLost)
	counter(c.pathsSkipped, s.SegmentPathsSkipped)
	gauge(c.pinnedBytes, s.PinnedBytes)
	gauge(c.pinLimit, s.PinLimitBytes)
	healthy := int64(1)
	if c.st.Health() != nil {
		healthy = 0
	}
	gauge(c.healthy, healthy)
}

// EvictionReasons are the reasons the store collector exports evictions
// by: every known one, and any other counts holds, sorted.
func EvictionReasons(counts map[string]uint64) []string { return reasonsOf(evictionReasons, counts) }

// RejectionReasons are the reasons the store collector exports rejections
// by: every known one, and any other counts holds, sorted.
func RejectionReasons(counts map[string]uint64) []string { return reasonsOf(rejectionReasons, counts) }

// reasonsOf is the known reasons plus any other key of counts, sorted.
func reasonsOf(known []string, counts map[string]uint64) []string {
	set := map[string]bool{}
	for _, r := range known {
		set[r] = true
	}
	for r := range counts {
		set[r] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// clusterCollector exports this node's view of the cluster, read at scrape
// time: members by state and liveness (from the member table, when members
// is set) and the ring's epoch and size. Safe for concurrent use; never
// blocks beyond a short lock.
type clusterCollector struct {
	members func() []membership.Member // nil: no member table (the ring alone)
	ring    func() *ring.Ring

	memberDesc, epochDesc, ringMembersDesc *prometheus.Desc
}

func newClusterCollector(members func() []membership.Member, rg func() *ring.Ring) *clusterCollector {
	return &clusterCollector{members: members, ring: rg,
		memberDesc: prometheus.NewDesc("kvring_cluster_members",
			"Members this node knows, by their own state (joining, active, draining, leaving) and gossip's liveness (alive, dead, left).",
			[]string{"state", "liveness"}, nil),
		epochDesc: prometheus.NewDesc("kvring_ring_epoch",
			"Epoch of this node's ring view; it changes with every ring rebuild.", nil, nil),
		ringMembersDesc: prometheus.NewDesc("kvring_ring_members",
			"Members that own partitions in this node's ring view.", nil, nil),
	}
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	if c.members != nil {
		ch <- c.memberDesc
	}
	ch <- c.epochDesc
	ch <- c.ringMembersDesc
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	if c.members != nil {
		type key struct {
			s membership.State
			l membership.Liveness
		}
		counts := map[key]int{}
		for _, m := range c.members() {
			counts[key{m.State, m.Liveness}]++
		}
		// Every known combination, so a state that empties reads 0 rather
		// than vanishing; anything unexpected is exported as it is.
		for _, s := range []membership.State{membership.Joining, membership.Active, membership.Draining, membership.Leaving} {
			for _, l := range []membership.Liveness{membership.Alive, membership.Dead, membership.Left} {
				if _, ok := counts[key{s, l}]; !ok {
					counts[key{s, l}] = 0
				}
			}
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.memberDesc, prometheus.GaugeValue, float64(n), k.s.String(), k.l.String())
		}
	}
	var epoch uint64
	members := 0
	if r := c.ring(); r != nil {
		epoch, members = r.Epoch(), r.Len()
	}
	ch <- prometheus.MustNewConstMetric(c.epochDesc, prometheus.GaugeValue, float64(epoch))
	ch <- prometheus.MustNewConstMetric(c.ringMembersDesc, prometheus.GaugeValue, float64(members))
}
