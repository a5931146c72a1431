package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kvring/kvring/internal/testutil"
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
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	kvringv1.RegisterCacheServer(gs, srv)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	c, err := New(Config{Conn: ConnConfig{Seeds: []string{lis.Addr().String()}}, Namespace: "ns",
		Schema: Schema{Model: "m", TokensPerChunk: 16}, DisableRouting: true, EagerPutBytes: 64 << 10,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	testutil.Eventually(t, "connected", 10*time.Second, func() bool { return c.State().Status == ConnConnected })
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
