package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/stats"

	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// Label values of kvring_put_chunks_total and kvring_put_bytes_total: a
// chunk's fate as its PutChunkResult reports it.
const (
	putStored      = "stored"
	putAlreadyHeld = "already_held"
	putRejected    = "rejected"
	putFailed      = "failed"
)

// Label values of kvring_get_chunks_total: a requested chunk's fate.
const (
	getHit           = "hit"            // its bytes were sent
	getMiss          = "miss"           // no owner holds it
	getChecksumError = "checksum_error" // bytes were found but failed their checksum, and no owner had good ones
	getUnavailable   = "unavailable"    // no owner answered
)

// latencyBuckets span a loopback call (tens of µs) to a call that waits out
// timeouts (10 s), in seconds.
var latencyBuckets = []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
	100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10}

// metrics holds the instruments one node updates as it serves. The
// store-derived and cluster-derived metrics are not here: storeCollector and
// clusterCollector read them at scrape time. Create with newMetrics; a
// *metrics is usable unregistered (its values then go nowhere) and is safe
// for concurrent use. Counters only go up.
type metrics struct {
	putChunks   *prometheus.CounterVec // result
	putBytes    *prometheus.CounterVec // result
	putDegraded prometheus.Counter
	// putBusyWait times puts that waited for another engine's write of the
	// same chunks (see awaitOtherWriters).
	putBusyWait prometheus.Observer

	lookups          prometheus.Counter
	lookupIDs        prometheus.Counter
	lookupIDsMatched prometheus.Counter

	getChunks *prometheus.CounterVec // result
	getBytes  prometheus.Counter
	// The vectors' children, resolved once: the data paths count per chunk.
	putBy map[string][2]prometheus.Counter // result → chunks, bytes
	getBy map[string]prometheus.Counter    // result → chunks

	requestSeconds                                          *prometheus.HistogramVec // op: put, lookup, get
	peerRequestSeconds                                      *prometheus.HistogramVec // op: prepare, commit, has, fetch
	putSeconds, lookupSeconds, getSeconds                   prometheus.Observer
	prepareSeconds, commitSeconds, hasSeconds, fetchSeconds prometheus.Observer

	peerBytes        *prometheus.CounterVec // direction: sent, received
	peerSent         prometheus.Counter
	peerReceived     prometheus.Counter
	peerFailures     prometheus.Counter
	connections      prometheus.Gauge
	connectionsTotal prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		putChunks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_put_chunks_total",
			Help: "Chunks this node coordinated a put for, by result (stored, already_held, rejected, failed)."}, []string{"result"}),
		putBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_put_bytes_total",
			Help: "Payload bytes of the chunks counted in kvring_put_chunks_total, by result."}, []string{"result"}),
		putDegraded: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_put_degraded_total",
			Help: "Chunks put (stored or already held) by fewer nodes than the namespace's replication factor."}),
		putBusyWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvring_put_busy_wait_seconds",
			Help: "Time a put waited for another write of the same chunks to finish before answering (only puts that waited).", Buckets: latencyBuckets}),
		lookups: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_lookups_total",
			Help: "Lookups this node answered."}),
		lookupIDs: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_lookup_ids_total",
			Help: "Chunk ids asked about in answered lookups."}),
		lookupIDsMatched: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_lookup_ids_matched_total",
			Help: "Leading chunk ids answered lookups reported held (the hit ratio is this over kvring_lookup_ids_total)."}),
		getChunks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_get_chunks_total",
			Help: "Chunks asked for in gets this node coordinated, by result (hit, miss, checksum_error, unavailable)."}, []string{"result"}),
		getBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_get_bytes_total",
			Help: "Payload bytes of the chunks counted as hits in kvring_get_chunks_total."}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvring_request_duration_seconds",
			Help: "Time to serve an engine call (put, lookup, get), errors included.", Buckets: latencyBuckets}, []string{"op"}),
		peerRequestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kvring_peer_request_duration_seconds",
			Help: "Time to serve a peer call as an owner (prepare, commit, has, fetch), errors included.", Buckets: latencyBuckets}, []string{"op"}),
		peerBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_peer_transfer_bytes_total",
			Help: "Chunk bytes moved between this node and its peers (put fan-out and fetches), by direction (sent, received)."}, []string{"direction"}),
		peerFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_peer_failures_total",
			Help: "Exchanges with a peer that failed because the peer was unreachable or did not answer in time."}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvring_grpc_connections",
			Help: "Open connections to this node's gRPC server (engines and peers)."}),
		connectionsTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_grpc_connections_opened_total",
			Help: "Connections this node's gRPC server accepted."}),
	}
	m.putBy, m.getBy = map[string][2]prometheus.Counter{}, map[string]prometheus.Counter{}
	for _, r := range []string{putStored, putAlreadyHeld, putRejected, putFailed} {
		m.putBy[r] = [2]prometheus.Counter{m.putChunks.WithLabelValues(r), m.putBytes.WithLabelValues(r)}
	}
	for _, r := range []string{getHit, getMiss, getChecksumError, getUnavailable} {
		m.getBy[r] = m.getChunks.WithLabelValues(r)
	}
	m.putSeconds = m.requestSeconds.WithLabelValues("put")
	m.lookupSeconds = m.requestSeconds.WithLabelValues("lookup")
	m.getSeconds = m.requestSeconds.WithLabelValues("get")
	m.prepareSeconds = m.peerRequestSeconds.WithLabelValues("prepare")
	m.commitSeconds = m.peerRequestSeconds.WithLabelValues("commit")
	m.hasSeconds = m.peerRequestSeconds.WithLabelValues("has")
	m.fetchSeconds = m.peerRequestSeconds.WithLabelValues("fetch")
	m.peerSent = m.peerBytes.WithLabelValues("sent")
	m.peerReceived = m.peerBytes.WithLabelValues("received")
	return m
}

// collectors returns every instrument, for registration.
func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.putChunks, m.putBytes, m.putDegraded, m.putBusyWait.(prometheus.Collector), m.lookups, m.lookupIDs, m.lookupIDsMatched,
		m.getChunks, m.getBytes, m.requestSeconds, m.peerRequestSeconds, m.peerBytes, m.peerFailures,
		m.connections, m.connectionsTotal}
}

// nodeCollectors is everything a node registers: m's instruments, the store
// and cluster views read at scrape time, and the count of unreachable peers.
// members may be nil (no member table).
func nodeCollectors(m *metrics, st *store.Store, svc *services, members func() []MemberInfo, rg func() *ring.Ring) []prometheus.Collector {
	return append(m.collectors(), newStoreCollector(st), newClusterCollector(members, rg), peersUnreachableGauge(svc.coord.peers))
}

// peersUnreachableGauge exports how many peers are in an outage now.
func peersUnreachableGauge(t *peerFailures) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvring_peers_unreachable",
		Help: "Peers this node failed to reach and has not reached since."}, func() float64 { return float64(t.unreachable()) })
}

// observeSince records the time since start; use as
// defer observeSince(m.putSeconds, time.Now()).
func observeSince(o prometheus.Observer, start time.Time) { o.Observe(time.Since(start).Seconds()) }

// registerAll registers cs with r and returns an undo that unregisters
// them. On error nothing stays registered.
func registerAll(r prometheus.Registerer, cs ...prometheus.Collector) (func(), error) {
	var done []prometheus.Collector
	undo := func() {
		for _, c := range done {
			r.Unregister(c)
		}
	}
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			undo()
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				err = fmt.Errorf("%w (does another node share this registerer? wrap it with a node label)", err)
			}
			return nil, fmt.Errorf("cannot register metrics: %w", err)
		}
		done = append(done, c)
	}
	return undo, nil
}

// metricsHandler serves the node's metrics in the Prometheus text format.
func (n *Node) metricsHandler() http.Handler {
	return promhttp.HandlerFor(n.cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: slogPrinter{n}})
}

// Gatherer returns what the admin server's GET /metrics serves: the
// configured Gatherer (by default the node's own registry). Safe for
// concurrent use; never blocks.
func (n *Node) Gatherer() prometheus.Gatherer { return n.cfg.Gatherer }

// slogPrinter lets promhttp log scrape errors through the node's logger.
type slogPrinter struct{ n *Node }

func (p slogPrinter) Println(v ...any) {
	p.n.log.Error("cannot serve metrics", "err", fmt.Sprint(v...))
}

// connCounter is a grpc stats.Handler that counts the server's open
// connections. It never blocks.
type connCounter struct{ m *metrics }

func (h connCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (h connCounter) HandleRPC(context.Context, stats.RPCStats)                         {}
func (h connCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (h connCounter) HandleConn(_ context.Context, s stats.ConnStats) {
	switch s.(type) {
	case *stats.ConnBegin:
		h.m.connections.Inc()
		h.m.connectionsTotal.Inc()
	case *stats.ConnEnd:
		h.m.connections.Dec()
	}
}
