package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvring/kvring/store"
)

// Node is one kvring node. Its methods are safe for concurrent use.
type Node struct {
	cfg Config
	log *slog.Logger

	ready atomic.Bool

	mu        sync.Mutex // guards the fields below and serialises Start/Close
	started   bool
	closed    bool
	store     *store.Store
	adminLis  net.Listener
	adminSrv  *http.Server
	wg        sync.WaitGroup
	closeErr  error
	startedAt time.Time
}

// New checks cfg and returns a node that is not started. It does no I/O.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Node{cfg: cfg, log: cfg.Logger}, nil
}

// Start opens the store, then the admin listener, and marks the node ready.
// It blocks until the node serves or a step fails.
func (n *Node) Start(ctx context.Context) (err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started || n.closed {
		return errors.New("node: Start called twice or after Close")
	}
	n.started = true
	n.startedAt = time.Now()
	defer func() {
		if err != nil {
			n.closeLocked(ctx)
		}
	}()

	t := time.Now()
	st, err := store.Open(n.cfg.Store)
	if err != nil {
		return fmt.Errorf("cannot start node: %w", err)
	}
	n.store = st
	n.log.Info("start-up phase done", "phase", "store", "duration", time.Since(t).Round(time.Microsecond))

	t = time.Now()
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", n.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("cannot start node: cannot listen for admin HTTP on %q: %w", n.cfg.AdminAddr, err)
	}
	n.adminLis = lis
	n.adminSrv = &http.Server{Handler: n.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.adminSrv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("admin server stopped", "err", err)
		}
	}()
	n.log.Info("start-up phase done", "phase", "admin", "addr", lis.Addr().String(), "duration", time.Since(t).Round(time.Microsecond))

	n.ready.Store(true)
	n.log.Info("node ready", "node", st.NodeID(), "admin", lis.Addr().String(),
		"memory_limit", st.Limit(), "startup", time.Since(n.startedAt).Round(time.Microsecond))
	return nil
}

// AdminAddr is the address the admin server listens on (useful with port 0).
func (n *Node) AdminAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.adminLis == nil {
		return ""
	}
	return n.adminLis.Addr().String()
}

// Store returns the node's local store (nil before Start).
func (n *Node) Store() *store.Store {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.store
}

// Ready reports whether the node serves.
func (n *Node) Ready() bool { return n.ready.Load() }

// Close stops the node: readiness goes false, the admin server drains
// in-flight requests until ctx ends, the store writes its catalog and closes,
// and every goroutine has exited when Close returns. Idempotent.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closeLocked(ctx)
}

func (n *Node) closeLocked(ctx context.Context) error {
	if n.closed {
		return n.closeErr
	}
	n.closed = true
	n.ready.Store(false)
	t := time.Now()
	var errs []error
	if n.adminSrv != nil {
		if err := n.adminSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("cannot drain admin server: %w", err))
			n.adminSrv.Close()
		}
	} else if n.adminLis != nil {
		n.adminLis.Close()
	}
	n.wg.Wait()
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	n.closeErr = errors.Join(errs...)
	if n.started {
		n.log.Info("node stopped", "duration", time.Since(t).Round(time.Microsecond), "err", n.closeErr)
	}
	return n.closeErr
}
