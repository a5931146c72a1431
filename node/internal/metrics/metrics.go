package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values of kvring_put_chunks_total and kvring_put_bytes_total: a
// chunk's fate as its PutChunkResult reports it.
const (
	PutStored      = "stored"
	PutAlreadyHeld = "already_held"
	PutRejected    = "rejected"
	PutFailed      = "failed"
)

// Label values of kvring_get_chunks_total: a requested chunk's fate.
const (
	GetHit           = "hit"            // its bytes were sent
	GetMiss          = "miss"           // no owner holds it
	GetChecksumError = "checksum_error" // bytes were found but failed their checksum, and no owner had good ones
	GetUnavailable   = "unavailable"    // no owner answered
)

// fanoutBuckets count nodes: a lookup should ask a handful, a cluster-wide
// one asks them all.
var fanoutBuckets = []float64{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256}

// latencyBuckets span a loopback call (tens of µs) to a call that waits out
// timeouts (10 s), in seconds.
var latencyBuckets = []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
	100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10}

// Set holds the instruments one node updates as it serves. The
// store-derived and cluster-derived metrics are not here: storeCollector and
// clusterCollector read them at scrape time. Create with New; a
// *Set is usable unregistered (its values then go nowhere) and is safe
// for concurrent use. Counters only go up.
type Set struct {
	PutChunks   *prometheus.CounterVec // result
	PutBytes    *prometheus.CounterVec // result
	PutDegraded prometheus.Counter
	// PutBusyWait times puts that waited for another engine's write of the
	// same chunks (see awaitOtherWriters).
	PutBusyWait prometheus.Observer
	// PutBeginRefused counts put streams refused because their client had
	// its bound of streams awaiting a begin message (coord's beginGate).
	PutBeginRefused prometheus.Counter

	Lookups          prometheus.Counter
	LookupIDs        prometheus.Counter
	LookupIDsMatched prometheus.Counter
	// LookupFanout is how many distinct nodes one answered Lookup asked
	// (both rounds together; this node counts when it is an owner).
	LookupFanout prometheus.Observer
	// LookupWideIDs counts the ids lookups asked of members besides their
	// owners (a hand-off summary named the id's partition, or the ring
	// was unsettled).
	LookupWideIDs prometheus.Counter
	// RESPUnpinned counts the keys the Redis-protocol port's EXISTS (or
	// SET NX/XX, SETNX, MSETNX) counted held without its lease pinning
	// them (a holder refused the pin: its pinned-bytes budget was spent).
	RESPUnpinned prometheus.Counter
	// AdminActions counts the admin API's write actions by action and
	// result (ok, refused, error).
	AdminActions *prometheus.CounterVec

	GetChunks *prometheus.CounterVec // result
	GetBytes  prometheus.Counter
	// The vectors' children, resolved once: the data paths count per chunk.
	PutBy map[string]PutCounters        // result → its chunk and byte counters
	GetBy map[string]prometheus.Counter // result → chunks

	RequestSeconds                                          *prometheus.HistogramVec // op: put, lookup, get
	PeerRequestSeconds                                      *prometheus.HistogramVec // op: prepare, commit, has, fetch
	PutSeconds, LookupSeconds, GetSeconds                   prometheus.Observer
	PrepareSeconds, CommitSeconds, HasSeconds, FetchSeconds prometheus.Observer

	PeerBytes    *prometheus.CounterVec // direction: sent, received
	PeerSent     prometheus.Counter
	PeerReceived prometheus.Counter
	PeerFailures prometheus.Counter
	// HasCoalesced counts the Has requests to peers this node sent in a
	// call shared with other requests (coord's hasCoalescer).
	HasCoalesced     prometheus.Counter
	Connections      prometheus.Gauge
	ConnectionsTotal prometheus.Counter
}

// PutCounters are the children of kvring_put_chunks_total and
// kvring_put_bytes_total for one result.
type PutCounters struct {
	Chunks, Bytes prometheus.Counter
}

// New returns a Set whose instruments are not registered.
func New() *Set {
	m := &Set{
		PutChunks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_put_chunks_total",
			Help: "Chunks this node coordinated a put for, by result (stored, already_held, rejected, failed)."}, []string{"result"}),
		PutBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_put_bytes_total",
			Help: "Payload bytes of the chunks counted in kvring_put_chunks_total, by result."}, []string{"result"}),
		PutDegraded: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_put_degraded_total",
			Help: "Chunks put (stored or already held) by fewer nodes than the namespace's replication factor."}),
		PutBusyWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvring_put_busy_wait_seconds",
			Help: "Time a put waited for another write of the same chunks to finish before answering (only puts that waited).", Buckets: latencyBuckets}),
		PutBeginRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_put_begin_refused_total",
			Help: "Put streams refused (ResourceExhausted) because their client kept its bound of other put streams waiting for their begin message until this one's begin deadline."}),
		Lookups: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_lookups_total",
			Help: "Lookups this node answered."}),
		LookupIDs: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_lookup_ids_total",
			Help: "Chunk ids asked about in answered Lookups."}),
		LookupIDsMatched: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_lookup_ids_matched_total",
			Help: "Leading chunk ids answered Lookups reported held (the hit ratio is this over kvring_lookup_ids_total)."}),
		GetChunks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_get_chunks_total",
			Help: "Chunks asked for in gets this node coordinated, by result (hit, miss, checksum_error, unavailable)."}, []string{"result"}),
		GetBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_get_bytes_total",
			Help: "Payload bytes of the chunks counted as hits in kvring_get_chunks_total."}),
		AdminActions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_admin_actions_total",
			Help: "Admin API actions (drain, undrain, drop-namespace, evict) by result: ok, refused, error."}, []string{"action", "result"}),
		LookupFanout: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvring_lookup_fanout",
			Help: "Distinct nodes one answered Lookup asked (this node included when it is an owner).", Buckets: fanoutBuckets}),
		LookupWideIDs: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_lookup_ids_wide_total",
			Help: "Chunk ids lookups asked of members besides their owners: members whose hand-off summary names the id's partition."}),
		RESPUnpinned: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_resp_exists_unpinned_total",
			Help: "Keys a Redis-protocol EXISTS (or SET NX/XX, SETNX, MSETNX) counted held that its lease could not pin (a holder's pinned-bytes budget, --max-pinned, was spent, or it did not answer the pinned lookup): a GET that follows may find them evicted."}),
		RequestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvring_request_duration_seconds",
			Help: "Time to serve an engine call (put, lookup, get), errors included.", Buckets: latencyBuckets}, []string{"op"}),
		PeerRequestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvring_peer_request_duration_seconds",
			Help: "Time to serve a peer call as an owner (prepare, commit, has, fetch), errors included.", Buckets: latencyBuckets}, []string{"op"}),
		PeerBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_peer_transfer_bytes_total",
			Help: "Chunk bytes moved between this node and its peers (put fan-out and fetches), by direction (sent, received)."}, []string{"direction"}),
		PeerFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_peer_failures_total",
			Help: "Exchanges with a peer that failed because the peer was unreachable or did not answer in time."}),
		HasCoalesced: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_peer_has_coalesced_total",
			Help: "Has requests to peers sent in one call with concurrent requests to the same peer (a call of k requests adds k)."}),
		Connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvring_grpc_connections",
			Help: "Open Connections to this node's gRPC server (engines and peers)."}),
		ConnectionsTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_grpc_connections_opened_total",
			Help: "Connections this node's gRPC server accepted."}),
	}
	m.PutBy, m.GetBy = map[string]PutCounters{}, map[string]prometheus.Counter{}
	for _, r := range []string{PutStored, PutAlreadyHeld, PutRejected, PutFailed} {
		m.PutBy[r] = PutCounters{Chunks: m.PutChunks.WithLabelValues(r), Bytes: m.PutBytes.WithLabelValues(r)}
	}
	for _, r := range []string{GetHit, GetMiss, GetChecksumError, GetUnavailable} {
		m.GetBy[r] = m.GetChunks.WithLabelValues(r)
	}
	m.PutSeconds = m.RequestSeconds.WithLabelValues("put")
	m.LookupSeconds = m.RequestSeconds.WithLabelValues("lookup")
	m.GetSeconds = m.RequestSeconds.WithLabelValues("get")
	m.PrepareSeconds = m.PeerRequestSeconds.WithLabelValues("prepare")
	m.CommitSeconds = m.PeerRequestSeconds.WithLabelValues("commit")
	m.HasSeconds = m.PeerRequestSeconds.WithLabelValues("has")
	m.FetchSeconds = m.PeerRequestSeconds.WithLabelValues("fetch")
	m.PeerSent = m.PeerBytes.WithLabelValues("sent")
	m.PeerReceived = m.PeerBytes.WithLabelValues("received")
	return m
}

// Collectors returns every instrument, for registration.
func (m *Set) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.PutChunks, m.PutBytes, m.PutDegraded, m.PutBusyWait.(prometheus.Collector), m.PutBeginRefused, m.Lookups, m.LookupIDs, m.LookupIDsMatched,
		m.LookupFanout.(prometheus.Collector), m.LookupWideIDs, m.RESPUnpinned, m.AdminActions,
		m.GetChunks, m.GetBytes, m.RequestSeconds, m.PeerRequestSeconds, m.PeerBytes, m.PeerFailures, m.HasCoalesced,
		m.Connections, m.ConnectionsTotal}
}

// ObserveSince records the time since start; use as
// defer ObserveSince(m.PutSeconds, time.Now()).
func ObserveSince(o prometheus.Observer, start time.Time) { o.Observe(time.Since(start).Seconds()) }
