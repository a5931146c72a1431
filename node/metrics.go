package node

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

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
