package resp

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The results of a key written (nsMetrics.write) or read (nsMetrics.read),
// indexes into nsCounts.
const (
	writeStored  = iota // stored by this write
	writeHeld           // held already with the same bytes: nothing to do
	writeRefused        // answered an error: not stored
	nWriteResults
)

const (
	readHit = iota
	readMiss
	readError // a member that may hold it did not answer
	nReadResults
)

var (
	writeResults = [nWriteResults]string{"stored", "held", "refused"}
	readResults  = [nReadResults]string{"hit", "miss", "error"}
)

// nsCounts are one namespace's counters.
type nsCounts struct {
	writes [nWriteResults]atomic.Int64
	reads  [nReadResults]atomic.Int64
}

// nsMetrics counts, per namespace, the keys written and read on the port:
// kvring_resp_namespace_writes_total{namespace,result} and
// kvring_resp_namespace_reads_total{namespace,result}. Only namespaces the
// node has registered are counted (callers pass the name of a namespace
// they resolved), so their number is bounded by the node's namespace
// limit; a namespace the node no longer knows (dropped, flushed) loses its
// series at the next scrape, and its counters start again at 0 should it
// be created again. A namespace that was counted once exports every result,
// zeros included, so that "no hit" is a series at 0 rather than no series.
// Safe for concurrent use; nothing blocks but a map lock.
type nsMetrics struct {
	// known reports whether the node still knows a namespace
	// (Cluster.Known); it must not block.
	known                 func(name string) bool
	writesDesc, readsDesc *prometheus.Desc

	mu      sync.RWMutex
	byName  map[string]*nsCounts
	pruneAt int // the map's size at which forgotten namespaces are dropped without a scrape
}

func newNSMetrics(known func(string) bool) *nsMetrics {
	return &nsMetrics{known: known, byName: map[string]*nsCounts{}, pruneAt: 256,
		writesDesc: prometheus.NewDesc("kvring_resp_namespace_writes_total",
			"Keys written on the Redis-protocol port (SET, SETNX, MSET, MSETNX), by namespace and result: stored, held (the same bytes were held already), refused (answered an error).",
			[]string{"namespace", "result"}, nil),
		readsDesc: prometheus.NewDesc("kvring_resp_namespace_reads_total",
			"Keys read on the Redis-protocol port (GET, MGET, GETRANGE, STRLEN, EXISTS), by namespace and result: hit, miss, error (a member that may hold the key did not answer).",
			[]string{"namespace", "result"}, nil),
	}
}

// counts returns the counters of namespace name, creating them.
func (m *nsMetrics) counts(name string) *nsCounts {
	m.mu.RLock()
	c := m.byName[name]
	m.mu.RUnlock()
	if c != nil {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c = m.byName[name]; c != nil {
		return c
	}
	if len(m.byName) >= m.pruneAt { // nobody scrapes: forget dropped namespaces here
		m.forget()
		m.pruneAt = max(256, 2*len(m.byName))
	}
	c = &nsCounts{}
	m.byName[name] = c
	return c
}

// forget drops the counters of namespaces the node no longer knows. The
// caller holds mu.
func (m *nsMetrics) forget() {
	for name := range m.byName {
		if !m.known(name) {
			delete(m.byName, name)
		}
	}
}

// write counts n keys of namespace name written with result r.
func (m *nsMetrics) write(name string, r, n int) {
	if n > 0 {
		m.counts(name).writes[r].Add(int64(n))
	}
}

// read counts a key of namespace name read with result r.
func (m *nsMetrics) read(name string, r int) { m.counts(name).reads[r].Add(1) }

// Describe implements prometheus.Collector.
func (m *nsMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.writesDesc
	ch <- m.readsDesc
}

// Collect implements prometheus.Collector: the counters of every namespace
// the node still knows; the others are forgotten.
func (m *nsMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	m.forget()
	type entry struct {
		name string
		c    *nsCounts
	}
	all := make([]entry, 0, len(m.byName))
	for name, c := range m.byName {
		all = append(all, entry{name, c})
	}
	m.mu.Unlock()
	for _, e := range all {
		for r, label := range writeResults {
			ch <- prometheus.MustNewConstMetric(m.writesDesc, prometheus.CounterValue, float64(e.c.writes[r].Load()), e.name, label)
		}
		for r, label := range readResults {
			ch <- prometheus.MustNewConstMetric(m.readsDesc, prometheus.CounterValue, float64(e.c.reads[r].Load()), e.name, label)
		}
	}
}
