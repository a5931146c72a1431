package coord

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	"github.com/kvring/kvring/internal/connpool"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// peerPool keeps one gRPC client connection per peer address (a
// connpool.Pool), created on first use and closed when the peer leaves or
// the node stops. Safe for concurrent use.
type peerPool struct{ p *connpool.Pool }

// newPeerPool makes the pool; extra options (TLS credentials, the cluster
// key) come after the defaults, so they replace the insecure transport.
func newPeerPool(extra ...grpc.DialOption) *peerPool {
	return &peerPool{p: connpool.New(append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// A peer that vanished without closing its connections is noticed
		// within ~15 s even with no call in flight.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		// The Prepare stream sends frames as transfer.OutFrame: the codec is
		// not optional.
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(transfer.NewCodec())),
		grpc.WithWriteBufferSize(1 << 20),
		// Fixed windows: no window update and ping per call (transfer.StreamWindow).
		grpc.WithInitialWindowSize(transfer.StreamWindow), grpc.WithInitialConnWindowSize(transfer.ConnWindow),
		experimental.WithBufferPool(transfer.BufferPool()), // gRPC fills what it takes: no clearing
	}, extra...)...)}
}

// client returns the Peer client for addr; errors wrap transfer.ErrUnavailable.
func (p *peerPool) client(addr string) (kvringv1.PeerClient, error) {
	cc, err := p.p.Get(addr)
	if err != nil {
		return nil, err
	}
	return kvringv1.NewPeerClient(cc), nil
}

// keep closes connections to addresses not in live.
func (p *peerPool) keep(live map[string]bool) { p.p.Keep(live) }

// close closes every connection; later clients fail. Idempotent.
func (p *peerPool) close() { p.p.Close() }
