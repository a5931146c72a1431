package localsock

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/kvring/kvring/node/internal/netguard"
)

// Server serves the local socket. Create it with Listen, run Serve on a
// goroutine, stop it with Close.
type Server struct {
	cfg Config
	log *slog.Logger
	lis *netguard.Listener // the socket's *net.UnixListener, guarded
	tab *table

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	done   chan struct{} // closed by Close
	wg     sync.WaitGroup
	nconns atomic.Int64
	seq    atomic.Uint64 // connections accepted, to name those without peer credentials
	// ownGuard: cfg.Guard is the server's own (the default), closed by Close.
	ownGuard bool
}

// Listen validates cfg and creates the socket file (see Config.Path). It
// does not serve yet: call Serve.
func Listen(cfg Config) (*Server, error) {
	ownGuard := cfg.Guard == nil // the default Guard is the server's to close
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	lis, err := listen(cfg.Path, cfg.Mode)
	if err != nil {
		if ownGuard {
			cfg.Guard.Close()
		}
		return nil, err
	}
	return &Server{cfg: cfg, log: cfg.Logger, lis: cfg.Guard.Wrap("localsock", lis, netguard.Limits{}), tab: newTable(cfg.MaxUnsealedBytes),
		conns: make(map[*conn]struct{}), done: make(chan struct{}), ownGuard: ownGuard}, nil
}

// Path is the socket file's path.
func (s *Server) Path() string { return s.cfg.Path }

// Connections is the number of connections served now.
func (s *Server) Connections() int { return int(s.nconns.Load()) }

// Serve accepts connections until Close; each is served on its own
// goroutine, which Close waits for. Running out of descriptors does not end
// it (Config.Guard). It blocks; it returns nil after Close.
func (s *Server) Serve() error {
	for {
		c0, err := s.lis.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("cannot accept on %q: %w", s.cfg.Path, err)
		}
		nc, ok := c0.(*net.UnixConn)
		if !ok {
			c0.Close()
			return fmt.Errorf("BUG: the local socket accepted a %T, not a Unix connection", c0)
		}
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		full := len(s.conns) >= s.cfg.MaxConns
		if !full {
			s.conns[c] = struct{}{}
			s.nconns.Add(1)
		}
		s.wg.Add(1)
		s.mu.Unlock()
		if full {
			go func() {
				defer s.wg.Done()
				writeFrame(nc, errorf(codeUnknownError, "the node serves %d local connections already", s.cfg.MaxConns), s.cfg.WriteTimeout)
				nc.Close()
			}()
			continue
		}
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			s.nconns.Add(-1)
		}()
	}
}

// Close stops accepting, removes the socket file, closes every connection
// (their unsealed blobs are freed and references released), waits for every
// goroutine the server started and frees every blob. Idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	err := s.lis.Close()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.tab.closeAll()
	if s.ownGuard {
		s.cfg.Guard.Close() // its reserve descriptor
	}
	if s.cfg.Cluster != nil {
		if cerr := s.cfg.Cluster.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("cannot close the local socket %q: %w", s.cfg.Path, err)
	}
	return nil
}
