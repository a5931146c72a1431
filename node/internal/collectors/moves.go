package collectors

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvring/kvring/node/internal/handoff"
	"github.com/kvring/kvring/node/membership"
)

// Moves export what the node gossips and knows of chunks held
// outside their owners, and the gossip bytes it sends, read at scrape time.
func Moves(m *membership.Membership, mv *handoff.Mover, partitions int) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvring_gossip_bytes_total",
			Help: "Gossip bytes this node put on the wire: packets it sent and both directions of streams it opened (summed over the members, each byte once)."},
			func() float64 { return float64(m.GossipBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvring_handoff_summary_partitions",
			Help: "Partitions this node's hand-off summary names: it may hold chunks of them without owning them, and reads ask it about them (until its first hand-off pass: every partition it holds chunks of at all, owned or not)."},
			func() float64 {
				if s := mv.Summary(); !s.All {
					return float64(s.Partitions())
				}
				return float64(partitions)
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvring_moving_members",
			Help: "Members that, as this node knows, may hold chunks of partitions they do not own: reads of those partitions ask them too."},
			func() float64 { return float64(m.Moves().Movers()) }),
	}
}
