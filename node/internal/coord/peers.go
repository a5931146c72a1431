package coord

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// peerPool keeps one gRPC client connection per peer address, created on
// first use (grpc.NewClient does not dial until a call needs it) and closed
// when the peer leaves or the node stops. Safe for concurrent use.
type peerPool struct {
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
	opts   []grpc.DialOption
}

func newPeerPool(opts ...grpc.DialOption) *peerPool {
	if len(opts) == 0 {
		opts = []grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			// A peer that vanished without closing its connections is noticed
			// within ~15 s even with no call in flight.
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		}
	}
	// The Prepare stream sends frames as transfer.OutFrame: the codec is
	// not optional.
	opts = append(slices.Clone(opts), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(transfer.NewCodec())),
		grpc.WithWriteBufferSize(1<<20))
	return &peerPool{conns: make(map[string]*grpc.ClientConn), opts: opts}
}

// client returns the Peer client for addr.
func (p *peerPool) client(addr string) (kvringv1.PeerClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("%w: node is shutting down", transfer.ErrUnavailable)
	}
	cc, ok := p.conns[addr]
	if !ok {
		var err error
		cc, err = grpc.NewClient(addr, p.opts...)
		if err != nil {
			return nil, fmt.Errorf("cannot create a client for peer %s: %w", addr, err)
		}
		p.conns[addr] = cc
	}
	return kvringv1.NewPeerClient(cc), nil
}

// keep closes connections to addresses not in live.
func (p *peerPool) keep(live map[string]bool) {
	p.mu.Lock()
	var stale []*grpc.ClientConn
	for addr, cc := range p.conns {
		if !live[addr] {
			stale = append(stale, cc)
			delete(p.conns, addr)
		}
	}
	p.mu.Unlock()
	for _, cc := range stale {
		cc.Close()
	}
}

func (p *peerPool) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, cc := range conns {
		cc.Close()
	}
}
