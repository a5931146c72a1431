// Package connpool keeps one gRPC client connection per address: the SDK's
// connections to ring owners, a node's to its peers.
//
// A Pool owns the connections it creates. It creates each on first use with
// the dial options given to New (grpc.NewClient does no I/O, so Get never
// dials; gRPC connects when the first call needs it), closes those to
// addresses that are no longer live (Keep) and all of them at Close. It does
// nothing else: it does not dial eagerly, check health, or retry calls. A
// call on one of its connections fails as gRPC fails it, and what to do then
// is the caller's business.
package connpool

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/transfer"
)

// ErrClosed is wrapped, together with transfer.ErrUnavailable, by the error
// Get returns once the pool is closed.
var ErrClosed = errors.New("connpool: pool is closed")

// Pool keeps one *grpc.ClientConn per address. Safe for concurrent use. No
// method waits for the network; Keep and Close close connections, which fails
// the calls in flight on them.
type Pool struct {
	opts []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// New returns an empty pool whose connections are created with opts (which
// must include transport credentials, as for grpc.NewClient). It does no I/O.
func New(opts ...grpc.DialOption) *Pool {
	return &Pool{opts: slices.Clone(opts), conns: make(map[string]*grpc.ClientConn)}
}

// Get returns the connection to addr, creating it without I/O on first use.
// Every Get of one address returns the same connection until Keep or Close
// closes it. The pool keeps ownership: callers must not close it. Errors wrap
// transfer.ErrUnavailable; after Close they also wrap ErrClosed.
func (p *Pool) Get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("%w: no connection to %s: %w", transfer.ErrUnavailable, addr, ErrClosed)
	}
	if cc := p.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot create a gRPC client for %s: %w", transfer.ErrUnavailable, addr, err)
	}
	p.conns[addr] = cc
	return cc, nil
}

// Keep closes the connections to addresses not in live; a later Get of such
// an address creates a new one. Calls in flight on a closed connection fail.
func (p *Pool) Keep(live map[string]bool) {
	p.mu.Lock()
	var gone []*grpc.ClientConn
	for addr, cc := range p.conns {
		if !live[addr] {
			gone = append(gone, cc)
			delete(p.conns, addr)
		}
	}
	p.mu.Unlock()
	closeAll(gone)
}

// Close closes every connection; later Gets fail with ErrClosed. Idempotent.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	gone := slices.Collect(maps.Values(p.conns))
	clear(p.conns)
	p.mu.Unlock()
	closeAll(gone)
}

func closeAll(conns []*grpc.ClientConn) {
	for _, cc := range conns {
		_ = cc.Close() // fails only for a connection closed already
	}
}
