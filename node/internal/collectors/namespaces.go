package collectors

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/store"
)

// namespaceCollector exports what this node's store holds and counts of
// each registered namespace, and its share, read at scrape time. The
// namespace label takes the registry's names: namespaces are registered
// (at most --max-namespaces), so the series are bounded. Safe for
// concurrent use; a scrape takes the registry's and the store's locks
// briefly.
type namespaceCollector struct {
	reg *namespace.Registry
	st  *store.Store

	bytes, chunks, guarantee, capBytes, evictions, hits, misses *prometheus.Desc
}

func newNamespaceCollector(reg *namespace.Registry, st *store.Store) *namespaceCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("kvring_namespace_"+name, help, []string{"namespace"}, nil)
	}
	return &namespaceCollector{reg: reg, st: st,
		bytes:     d("bytes", "Memory the namespace's sealed chunks take on this node (slots: payload plus allocator waste)."),
		chunks:    d("chunks", "Sealed chunks of the namespace held on this node."),
		guarantee: d("guarantee_bytes", "The namespace's guaranteed share of this node's memory; 0 for none."),
		capBytes:  d("cap_bytes", "The namespace's cap on this node's memory; 0 for none."),
		evictions: d("evictions_total", "Chunks of the namespace the eviction policy removed on this node."),
		hits:      d("hits_total", "Chunk ids of the namespace that lookups on this node found held in memory."),
		misses:    d("misses_total", "Chunk ids of the namespace that lookups on this node did not find in memory."),
	}
}

func (c *namespaceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.bytes, c.chunks, c.guarantee, c.capBytes, c.evictions, c.hits, c.misses} {
		ch <- d
	}
}

func (c *namespaceCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.st.NamespaceStats()
	for _, rec := range c.reg.List() {
		name := rec.GetName()
		s := stats[namespace.StoreName(name, rec.GetFingerprint())]
		gauge := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), name)
		}
		counter := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), name)
		}
		gauge(c.bytes, s.Bytes)
		gauge(c.chunks, s.Chunks)
		gauge(c.guarantee, s.GuaranteeBytes)
		gauge(c.capBytes, s.CapBytes)
		counter(c.evictions, s.Evictions)
		counter(c.hits, s.Hits)
		counter(c.misses, s.Misses)
	}
}
