package handoff

import "github.com/prometheus/client_golang/prometheus"

// Collectors returns the Mover's metrics, read from its Status at scrape
// time.
func (m *Mover) Collectors() []prometheus.Collector {
	gauge := func(name, help string, f func(Status) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(m.Status()) })
	}
	counter := func(name, help string, f func(Status) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return f(m.Status()) })
	}
	return []prometheus.Collector{
		gauge("kvring_underreplicated_chunks",
			"Chunks this node owns that fewer owners hold than their namespace's replication factor, as of the last hand-off pass.",
			func(s Status) float64 { return float64(s.Last.Underreplicated) }),
		gauge("kvring_handoff_pending_chunks",
			"Chunks this node holds that belong on other nodes and were not handed off yet, as of the last hand-off pass.",
			func(s Status) float64 { return float64(s.Last.Pending) }),
		counter("kvring_handoff_copied_chunks_total", "Chunks the hand-off copied to other nodes (sealed there).",
			func(s Status) float64 { return float64(s.CopiedChunks) }),
		counter("kvring_handoff_copied_bytes_total", "Bytes of the chunks the hand-off copied to other nodes.",
			func(s Status) float64 { return float64(s.CopiedBytes) }),
		counter("kvring_handoff_evicted_chunks_total", "Chunks removed from this node after their owners sealed them.",
			func(s Status) float64 { return float64(s.EvictedChunks) }),
		counter("kvring_handoff_failed_copies_total", "Copies the receiving node refused or that failed.",
			func(s Status) float64 { return float64(s.FailedCopies) }),
		counter("kvring_handoff_passes_total", "Hand-off passes run.",
			func(s Status) float64 { return float64(s.Passes) }),
	}
}
