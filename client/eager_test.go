package client

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// needFirstCache answers Put the way a node from before eager puts does:
// need first (every chunk), then the result once the end arrives. It
// records whether the client asked for an eager put and how many data
// bytes it received.
type needFirstCache struct {
	scriptedCache
	eager atomic.Bool
	bytes atomic.Int64
}

func (s *needFirstCache) Put(stream grpc.BidiStreamingServer[kvringv1.PutRequest, kvringv1.PutResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	begin := first.GetBegin()
	s.eager.Store(begin.GetEager())
	need := &kvringv1.PutNeed{}
	for i := range begin.GetChunks() {
		need.Need = append(need.Need, uint32(i))
	}
	if err := stream.Send(&kvringv1.PutResponse{Epoch: 1, Msg: &kvringv1.PutResponse_Need{Need: need}}); err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) || (err == nil && m.GetEnd() != nil) {
			break
		}
		if err != nil {
			return err
		}
		s.bytes.Add(int64(len(m.GetData().GetData())))
	}
	res := &kvringv1.PutResult{}
	for i := range begin.GetChunks() {
		res.Results = append(res.Results, &kvringv1.PutChunkResult{Index: uint32(i), Status: kvringv1.PutStatus_PUT_STATUS_STORED,
			Holders: []*kvringv1.NodeRef{{NodeId: "n1", GrpcAddr: "x"}}})
	}
	return stream.Send(&kvringv1.PutResponse{Epoch: 1, Msg: &kvringv1.PutResponse_Result{Result: res}})
}

// TestEagerPutsAreSmallAndWorkWithOlderNodes: a put of at most
// EagerPutBytes asks for an eager put, one above it does not, and either
// way a node that predates eager puts (it sends its need first) gets every
// byte once and the client reports its results.
func TestEagerPutsAreSmallAndWorkWithOlderNodes(t *testing.T) {
	t.Parallel()
	srv := &needFirstCache{}
	c := fakeNodeClient(t, srv, func(cfg *Config) { cfg.EagerPutBytes = 64 << 10 })
	for _, tt := range []struct {
		size  int
		eager bool
	}{{1000, true}, {64 << 10, true}, {64<<10 + 1, false}} {
		srv.bytes.Store(0)
		var id ChunkID
		id[0] = byte(tt.size)
		res, err := c.Put(context.Background(), []Chunk{{ID: id, Data: make([]byte, tt.size)}})
		if err != nil || len(res) != 1 || res[0].Status != Stored {
			t.Fatalf("put of %d bytes: %v %+v", tt.size, err, res)
		}
		if srv.eager.Load() != tt.eager || srv.bytes.Load() != int64(tt.size) {
			t.Fatalf("put of %d bytes: eager %v (want %v), %d bytes sent (want %d)", tt.size, srv.eager.Load(), tt.eager, srv.bytes.Load(), tt.size)
		}
	}
}
