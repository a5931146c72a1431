package resp

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the kvring_resp_* instruments, and the counters INFO reports
// (the same numbers).
type metrics struct {
	commands    *prometheus.CounterVec // command (known names only, else "unknown")
	errors      *prometheus.CounterVec // reason
	keyspace    *prometheus.CounterVec // result: hit, miss
	connections prometheus.GaugeFunc
	accepted    *prometheus.CounterVec // result: accepted, rejected
	keptValues  prometheus.Counter
	fallbacks   prometheus.Counter
	// valueBytes and valuesRefused report Server.values.
	valueBytes    prometheus.GaugeFunc
	valuesRefused prometheus.CounterFunc
	// valuesWaiting reports the values waiting for room in Server.values.
	valuesWaiting prometheus.GaugeFunc

	// The counters of every known command and of the keyspace results,
	// looked up once: a command costs no label hashing.
	byCommand          map[string]prometheus.Counter
	unknown, hit, miss prometheus.Counter

	hits, misses, commandsN, connsTotal, rejected atomic.Int64
}

func newMetrics(conns func() float64, values *valueShares) *metrics {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_resp_commands_total",
			Help: "Commands served on the Redis-protocol port, by command (unknown ones as \"unknown\")."}, []string{"command"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_resp_errors_total",
			Help: "Error replies on the Redis-protocol port, by reason."}, []string{"reason"}),
		keyspace: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_resp_keyspace_total",
			Help: "Keys read on the Redis-protocol port (GET, MGET, GETRANGE, STRLEN, EXISTS), by result: hit or miss."}, []string{"result"}),
		connections: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvring_resp_connections",
			Help: "Connections open on the Redis-protocol port."}, conns),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_resp_connections_total",
			Help: "Connections to the Redis-protocol port, by result: accepted, or rejected (over the connection cap)."}, []string{"result"}),
		keptValues: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_resp_kept_values_total",
			Help: "Values of SET, SETNX, MSET and MSETNX read past, not into memory, because their key was stored already (values are immutable: the first stays)."}),
		fallbacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvring_resp_namespace_fallbacks_total",
			Help: "Keys written to the default namespace because their own could not be created (the node holds as many namespaces as it may)."}),
		valueBytes: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvring_resp_value_bytes",
			Help: "Bytes of shared memory held by values being received on the Redis-protocol port (their commands have not run yet)."},
			func() float64 { return float64(values.held()) }),
		valuesRefused: prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvring_resp_values_refused_total",
			Help: "Values refused (-OOM) because the budget of values being received, or their client's share of it, was taken."},
			func() float64 { return float64(values.refusals()) }),
		valuesWaiting: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvring_resp_values_waiting",
			Help: "Values waiting for room in the budget of values being received (or in their client's share of it) before they are read; refused -OOM at their command's deadline."},
			func() float64 { return float64(values.waiters()) }),
	}
	m.byCommand = make(map[string]prometheus.Counter, len(commands))
	for name := range commands {
		m.byCommand[name] = m.commands.WithLabelValues(name)
	}
	m.unknown = m.commands.WithLabelValues("unknown")
	m.hit, m.miss = m.keyspace.WithLabelValues("hit"), m.keyspace.WithLabelValues("miss")
	return m
}

func (m *metrics) command(name string) {
	m.commandsN.Add(1)
	if c, ok := m.byCommand[name]; ok {
		c.Inc()
		return
	}
	m.unknown.Inc()
}

// fallback counts n keys written to the default namespace.
func (m *metrics) fallback(n int) { m.fallbacks.Add(float64(n)) }

// kept counts a value whose key was stored already.
func (m *metrics) kept() { m.keptValues.Inc() }

func (m *metrics) error(reason string) { m.errors.WithLabelValues(reason).Inc() }

func (m *metrics) read(hit bool) {
	if hit {
		m.hits.Add(1)
		m.hit.Inc()
	} else {
		m.misses.Add(1)
		m.miss.Inc()
	}
}

// Collectors are the server's kvring_resp_* metrics, for the node to
// register.
func (s *Server) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.m.commands, s.m.errors, s.m.keyspace, s.m.connections, s.m.accepted, s.m.keptValues,
		s.m.fallbacks, s.m.valueBytes, s.m.valuesRefused, s.m.valuesWaiting, s.ns}
}
