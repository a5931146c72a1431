package collectors

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvring/kvring/node/internal/services"
)

// Spread are the hot-group spreading metrics, read at scrape time.
func Spread(s *services.Services) []prometheus.Collector {
	counter := func(name, help string, f func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvring_spread_groups",
			Help: "Hot groups this node keeps spread copies of, or spreads as their primary owner, now."},
			func() float64 { return float64(s.Spread.Holding()) }),
		counter("kvring_spread_hot_groups_total", "Times this node, a group's primary owner, found the group hot and copied it to its spread members.",
			func() uint64 { return s.Spreader.Stats().Spread }),
		counter("kvring_spread_copied_chunks_total", "Chunks of hot groups this node sealed on their spread members.",
			func() uint64 { return s.Spreader.Stats().Copied }),
		counter("kvring_spread_failed_copies_total", "Copies of hot groups' chunks a spread member refused or that failed.",
			func() uint64 { return s.Spreader.Stats().Failed }),
		counter("kvring_spread_dropped_total", "Hot groups not spread because the spreader was busy (they are offered again in their next hot window).",
			func() uint64 { return s.Spreader.Stats().Dropped }),
	}
}
