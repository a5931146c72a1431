// Package netguard wraps a node's listeners (gRPC, admin HTTP, the local
// socket) so that their accept loops survive descriptor exhaustion and so
// that no one remote address, nor all of them together, can hold more than
// a configured number of connections.
//
// Accepting a connection needs a file descriptor. When the process has none
// left (EMFILE) or the system has none (ENFILE, or no memory for a socket:
// ENOBUFS, ENOMEM), accept(2) fails and the connection stays in the
// kernel's queue. A server loop that ends on such an error never accepts
// again; one that retries at once spins. A guarded listener backs off
// (5 ms doubling to 1 s), counts the failure, marks itself starved (the
// node reports not ready meanwhile) and retries; it is no longer starved
// once an accept succeeds or a probe finds descriptors free again.
//
// Meanwhile the queued connections are shed rather than left to wait for
// their clients' timeouts: the Guard holds one descriptor in reserve
// (/dev/null, opened by New); a starved listener gives it up, accepts the
// oldest queued connection with it, closes that at once (counted as refused,
// cap "descriptors"), and takes the reserve back. A client then learns at
// once that the node cannot take it, and tries another.
package netguard

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Guard is what the guarded listeners of one node share: their metrics and
// which of them are starved now. Safe for concurrent use; no method blocks.
type Guard struct {
	log *slog.Logger

	acceptErrors *prometheus.CounterVec
	starvedGauge *prometheus.GaugeVec
	refused      *prometheus.CounterVec
	// spare is the descriptor held back for shedding (Listener.shed).
	spare reserve

	mu      sync.Mutex
	starved map[string]error // listener name → the accept error that starved it
}

// New returns a Guard that logs to log (slog.Default() when nil). Its
// metrics are registered by the caller (Collectors).
func New(log *slog.Logger) *Guard {
	if log == nil {
		log = slog.Default()
	}
	return &Guard{
		log: log,
		acceptErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_accept_errors_total",
			Help: "Accepts that failed for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) and were retried, by listener."},
			[]string{"listener"}),
		starvedGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kvring_accept_starved",
			Help: "1 while the listener cannot accept connections for want of descriptors (the node is not ready meanwhile)."},
			[]string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvring_connections_refused_total",
			Help: "Connections closed as soon as they were accepted because a connection cap was reached, by listener and cap (node, addr; descriptors: shed while the process had none for them)."},
			[]string{"listener", "cap"}),
		starved: make(map[string]error),
		spare:   newFileReserve(),
	}
}

// Close gives up the descriptor the Guard holds back for shedding. Call it
// once every guarded listener is closed.
func (g *Guard) Close() error { return g.spare.close() }

// Collectors returns the Guard's metrics, for the node to register.
func (g *Guard) Collectors() []prometheus.Collector {
	return []prometheus.Collector{g.acceptErrors, g.starvedGauge, g.refused}
}

// Starved returns nil while every guarded listener accepts, otherwise an
// error naming the starved listeners and the last error of one of them.
func (g *Guard) Starved() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.starved) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(g.starved))
	return fmt.Errorf("cannot accept connections on %s: %w", strings.Join(names, ", "), g.starved[names[0]])
}

// setStarved records that listener name cannot accept (err) or can again
// (nil), logging and exporting each change once.
func (g *Guard) setStarved(name string, err error) {
	g.mu.Lock()
	_, was := g.starved[name]
	if err != nil {
		g.starved[name] = err
	} else {
		delete(g.starved, name)
	}
	g.mu.Unlock()
	switch {
	case err != nil && !was:
		g.starvedGauge.WithLabelValues(name).Set(1)
		g.log.Error("cannot accept connections: out of descriptors; retrying with backoff, the node is not ready meanwhile",
			"listener", name, "err", err)
	case err == nil && was:
		g.starvedGauge.WithLabelValues(name).Set(0)
		g.log.Info("accepting connections again", "listener", name)
	}
}
