package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/localsock"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// socketCluster serves the local socket's extensions. Publish, namespace
// registration, lookups and lease releases run in process, through the
// coordinator and its Cache service (the same code a remote engine's calls
// run: two-phase write, limits, metrics), so a published blob is never
// copied through the network stack and, when this node owns the chunk, its
// slot becomes the chunk. Get of chunks this node does not hold goes
// through the node's own Cache.Get over a gRPC connection to its own
// listener (the connection is made on first use).
type socketCluster struct {
	coord *coord.Coordinator
	svc   *coord.Service
	addr  string
	dial  []grpc.DialOption // credentials of this node's own listener (security.localDialOptions)

	mu  sync.Mutex
	cc  *grpc.ClientConn
	err error
}

// newSocketCluster is the Cluster of the local socket's extensions.
func newSocketCluster(_ *Node, p *nodeParts) localsock.Cluster {
	opts := p.sec.localDialOptions()
	addr := p.grpcLis.Addr().String()
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
	}
	return &socketCluster{coord: p.svc.coord, svc: coord.NewService(p.svc.coord), addr: addr, dial: opts}
}

func (s *socketCluster) cache() (kvringv1.CacheClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cc == nil && s.err == nil {
		s.cc, s.err = grpc.NewClient(s.addr, append(s.dial,
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(transfer.NewCodec())),
			grpc.WithReadBufferSize(256<<10), grpc.WithWriteBufferSize(1<<20))...)
		if s.err != nil {
			s.err = fmt.Errorf("cannot connect to this node's gRPC server at %s: %w", s.addr, s.err)
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	return kvringv1.NewCacheClient(s.cc), nil
}

func (s *socketCluster) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cc == nil {
		return nil
	}
	err := s.cc.Close()
	s.cc = nil
	s.err = fmt.Errorf("closed")
	return err
}

func (s *socketCluster) RegisterNamespace(ctx context.Context, req *kvringv1.RegisterNamespaceRequest) (*kvringv1.RegisterNamespaceResponse, error) {
	return s.svc.RegisterNamespace(ctx, req)
}

func (s *socketCluster) Lookup(ctx context.Context, req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	return s.svc.Lookup(ctx, req)
}

func (s *socketCluster) ReleaseLease(ctx context.Context, lease uint64) (bool, error) {
	r, err := s.svc.ReleaseLease(ctx, &kvringv1.ReleaseLeaseRequest{LeaseId: lease})
	return r.GetReleased(), err
}

// Publish runs the coordinator's two-phase write of blobs in process.
func (s *socketCluster) Publish(ctx context.Context, begin *kvringv1.PutBegin, blobs []*store.Blob) (localsock.PutOutcome, error) {
	epoch, results, err := s.coord.Publish(ctx, begin, blobs)
	return localsock.PutOutcome{Epoch: epoch, Results: results}, err
}

// Get reads the chunks of req into the buffers alloc gives, verifying each
// chunk's checksum.
func (s *socketCluster) Get(ctx context.Context, req *kvringv1.GetRequest, alloc func(int, int64) ([]byte, error),
	done func(int, *kvringv1.ChunkHeader, bool, string)) error {
	c, err := s.cache()
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Get(sctx, req)
	if err != nil {
		return err
	}
	cur, curIdx, filled := []byte(nil), -1, 0
	var curHdr *kvringv1.ChunkHeader
	finish := func() {
		if curIdx < 0 {
			return
		}
		switch {
		case cur == nil:
		case filled != len(cur):
			done(curIdx, curHdr, false, fmt.Sprintf("the stream ended after %d of %d bytes", filled, len(cur)))
		case !sumMatches(cur, curHdr.GetChunk().GetCrc32C()):
			done(curIdx, curHdr, false, "the bytes failed their checksum (or their memory faulted)")
		default:
			done(curIdx, curHdr, true, "")
		}
		curIdx, cur = -1, nil
	}
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			finish()
			return nil
		}
		if err != nil {
			finish()
			return err
		}
		if h := m.GetHeader(); h != nil {
			finish()
			i := int(h.GetIndex())
			if i >= len(req.GetIds()) {
				return fmt.Errorf("the node answered for chunk %d of %d", i, len(req.GetIds()))
			}
			if h.GetStatus() != kvringv1.ReadStatus_READ_STATUS_FOUND {
				done(i, h, false, fmt.Sprintf("%s: %s", h.GetStatus(), h.GetReason()))
				continue
			}
			buf, aerr := alloc(i, int64(h.GetChunk().GetSize()))
			if aerr != nil {
				done(i, h, false, fmt.Sprintf("no local memory for the chunk: %v", aerr))
				curIdx, cur = -1, nil
				continue
			}
			curIdx, cur, filled, curHdr = i, buf, 0, h
			continue
		}
		if f := m.GetData(); f != nil && cur != nil {
			if f.GetOffset() != uint64(filled) || filled+len(f.GetData()) > len(cur) {
				return fmt.Errorf("chunk %d: a frame at offset %d does not follow byte %d", curIdx, f.GetOffset(), filled)
			}
			// The blob's segment was handed to a local client, which may
			// truncate it: copy under a fault guard.
			if err := store.Guarded(func() { filled += copy(cur[filled:], f.GetData()) }); err != nil {
				return fmt.Errorf("chunk %d: cannot write its blob: %w", curIdx, err)
			}
		}
	}
}

// sumMatches reports whether a blob's bytes, read under a fault guard,
// have the CRC-32C want (false when the memory faulted).
func sumMatches(b []byte, want uint32) bool {
	var sum uint32
	err := store.Guarded(func() { sum = store.Checksum(b) })
	return err == nil && sum == want
}
