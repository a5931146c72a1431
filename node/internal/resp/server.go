package resp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Server serves the Redis protocol on its listeners (a TCP port, a Unix
// socket), with the same commands, authentication and limits on each:
// MaxConns counts the connections of all. Create it with New, run Serve on
// a goroutine, stop it with Close. Safe for concurrent use.
type Server struct {
	cfg   Config
	log   *slog.Logger
	lis   []net.Listener
	m     *metrics
	start time.Time

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
	nconns atomic.Int64
	nextID atomic.Int64
	// mem bounds the heap all connections hold (Config.MaxClientMemory).
	mem *memBudget
	// values bounds the values being received (Config.MaxValueBytes).
	values *valueShares
	// scratch: the buffers values that are not kept are read past into.
	scratch *sync.Pool
	// bufs: the buffers connections use while they serve a request
	// (idle.go); bufsHeld counts the connections holding theirs.
	bufs     *sync.Pool
	bufsHeld atomic.Int64
	// warned rate-limits the WARN lines of refused writes and of keys
	// written to the default namespace (conn.warnRefusal).
	warned *warnings
	// ns counts keys written and read per namespace.
	ns *nsMetrics
}

// New validates cfg and returns a Server for its listeners (at least one),
// which it owns from now on (Close closes them). Config.TLS applies to the
// listeners that are not Unix sockets (a Unix socket's file mode guards
// it, and Redis clients speak no TLS on one). It does not serve yet: call
// Serve.
func New(cfg Config, listeners ...net.Listener) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(listeners) == 0 {
		return nil, errors.New("resp: no listener")
	}
	lis := make([]net.Listener, len(listeners))
	for i, l := range listeners {
		lis[i] = l
		if cfg.TLS != nil && l.Addr().Network() != "unix" {
			lis[i] = tls.NewListener(l, cfg.TLS)
		}
	}
	s := &Server{cfg: cfg, log: cfg.Logger, lis: lis, conns: make(map[*conn]struct{}), start: time.Now(),
		mem: &memBudget{limit: cfg.MaxClientMemory}, values: newValueShares(cfg.MaxValueBytes),
		scratch: newScratch(), bufs: newBufPool(), warned: newWarnings(refusalWarnEvery, maxWarnKeys, maxWarnLines)}
	s.ns = newNSMetrics(func(name string) bool { _, ok := cfg.Cluster.Known(name); return ok })
	s.m = newMetrics(func() float64 { return float64(s.nconns.Load()) }, s.values)
	return s, nil
}

// Addr is the first listener's address.
func (s *Server) Addr() net.Addr { return s.lis[0].Addr() }

// Connections is the number of connections served now.
func (s *Server) Connections() int { return int(s.nconns.Load()) }

// Serve accepts connections on every listener until Close; each is served
// on its own goroutine, which Close waits for. A failed accept for lack of
// descriptors is retried after a pause, so the port serves again once they
// are back. It blocks until every listener's loop has ended; it returns
// nil after Close, else the errors that ended them.
func (s *Server) Serve() error {
	errs := make([]error, len(s.lis))
	var wg sync.WaitGroup
	for i, l := range s.lis[1:] {
		wg.Go(func() { errs[i+1] = s.accept(l) })
	}
	errs[0] = s.accept(s.lis[0])
	wg.Wait()
	return errors.Join(errs...)
}

// accept serves the connections of lis until Close, or until it fails for
// good.
func (s *Server) accept(lis net.Listener) error {
	pause := 5 * time.Millisecond
	for {
		nc, err := lis.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if temporary(err) {
				s.log.Warn("cannot accept a Redis-protocol connection; retrying", "addr", lis.Addr(), "err", err, "pause", pause)
				time.Sleep(pause)
				pause = min(2*pause, time.Second)
				continue
			}
			return fmt.Errorf("cannot accept on %s: %w", lis.Addr(), err)
		}
		pause = 5 * time.Millisecond
		s.admit(nc)
	}
}

// temporary reports whether an accept error passes: a timeout, or too many
// open descriptors.
func temporary(err error) bool {
	var ne net.Error
	return (errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, syscall.EMFILE) ||
		errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// admit serves nc on a goroutine, or refuses it when the server is full.
func (s *Server) admit(nc net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	full := len(s.conns) >= s.cfg.MaxConns
	var c *conn
	if !full { // a refused connection gets no conn: its writer's goroutine would never end
		c = newConn(s, nc)
		s.conns[c] = struct{}{}
		s.nconns.Add(1)
	}
	s.wg.Add(1)
	s.mu.Unlock()
	if full {
		s.m.rejected.Add(1)
		s.m.accepted.WithLabelValues("rejected").Inc()
		go func() {
			defer s.wg.Done()
			nc.SetWriteDeadline(time.Now().Add(time.Second))
			nc.Write([]byte("-ERR max number of clients reached\r\n"))
			nc.Close()
		}()
		return
	}
	s.m.connsTotal.Add(1)
	s.m.accepted.WithLabelValues("accepted").Inc()
	go func() {
		defer s.wg.Done()
		c.serve()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.nconns.Add(-1)
	}()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops accepting, closes every connection (the values of commands
// in flight are freed) and waits for every goroutine the server started.
// Idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var errs []error
	for _, l := range s.lis {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("cannot close the Redis-protocol listener on %s: %w", l.Addr(), err))
		}
	}
	for c := range s.conns {
		if c.cancel != nil {
			c.cancel()
		}
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return errors.Join(errs...)
}
