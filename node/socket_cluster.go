package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/node/internal/localsock"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// socketCluster serves the local socket's extensions through this node's
// own Cache service, over a gRPC connection to its own listener: publish,
// lookup and get then run exactly the code a remote engine's calls run
// (the coordinator's two-phase write, its lookups and reads, the limits,
// the metrics), with no second implementation to keep in step. The cost is
// one loopback hop for the bytes (the blob's memory is lent to gRPC
// without a copy on the way out). The connection is made on first use.
type socketCluster struct {
	addr string
	dial []grpc.DialOption // credentials of this node's own listener (security.localDialOptions)

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
	return &socketCluster{addr: addr, dial: opts}
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
	c, err := s.cache()
	if err != nil {
		return nil, err
	}
	return c.RegisterNamespace(ctx, req)
}

func (s *socketCluster) Lookup(ctx context.Context, req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	c, err := s.cache()
	if err != nil {
		return nil, err
	}
	return c.Lookup(ctx, req)
}

func (s *socketCluster) ReleaseLease(ctx context.Context, lease uint64) (bool, error) {
	c, err := s.cache()
	if err != nil {
		return false, err
	}
	r, err := c.ReleaseLease(ctx, &kvringv1.ReleaseLeaseRequest{LeaseId: lease})
	return r.GetReleased(), err
}

// lentTimeout bounds the wait for gRPC to hand back a failed put's frames.
const lentTimeout = 5 * time.Second

// Put runs the Cache.Put exchange: begin, need, the needed chunks' frames
// (borrowed from data), end, result.
func (s *socketCluster) Put(ctx context.Context, begin *kvringv1.PutBegin, data [][]byte) (out localsock.PutOutcome, err error) {
	c, err := s.cache()
	if err != nil {
		return out, err
	}
	var lent transfer.Lender
	defer func() {
		if lent.Outstanding() > 0 && !lent.Wait(lentTimeout) {
			out.Lent = true
		}
	}()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Put(sctx)
	if err != nil {
		return out, err
	}
	fail := func(err error) (localsock.PutOutcome, error) {
		if _, rerr := stream.Recv(); rerr != nil && rerr != io.EOF {
			err = rerr
		}
		return out, err
	}
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: begin}}); err != nil {
		return fail(err)
	}
	m, err := stream.Recv()
	if err != nil {
		return out, err
	}
	need := m.GetNeed()
	out.Results = append(out.Results, need.GetSettled()...)
	for _, idx := range need.GetNeed() {
		if int(idx) >= len(data) {
			return out, fmt.Errorf("the node asked for chunk %d of %d", idx, len(data))
		}
		err := transfer.SplitFrames(idx, data[idx], transfer.MaxFrameBytes, func(f *kvringv1.DataFrame) error {
			return stream.SendMsg(&transfer.OutFrame{Field: transfer.PutDataField, Index: f.Index, Offset: f.Offset,
				Data: [][]byte{f.Data}, Borrow: true, Lender: &lent})
		})
		if err != nil {
			return fail(err)
		}
	}
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}}); err != nil {
		return fail(err)
	}
	if err := stream.CloseSend(); err != nil {
		return fail(err)
	}
	if m, err = stream.Recv(); err != nil {
		return out, err
	}
	out.Epoch = m.GetEpoch()
	out.Results = append(out.Results, m.GetResult().GetResults()...)
	return out, nil
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
		case store.Checksum(cur) != curHdr.GetChunk().GetCrc32C():
			done(curIdx, curHdr, false, "the bytes failed their checksum")
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
			filled += copy(cur[filled:], f.GetData())
		}
	}
}
