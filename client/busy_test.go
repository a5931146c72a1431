package client

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// busyOnceCache answers the first put of every chunk failed with code
// ABORTED (another write of it was under way) and stores it on the next.
type busyOnceCache struct {
	scriptedCache
	puts atomic.Int32
}

func (s *busyOnceCache) Put(stream grpc.BidiStreamingServer[kvringv1.PutRequest, kvringv1.PutResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	n := len(first.GetBegin().GetChunks())
	for { // the client sends its bytes eagerly: take them, up to the end
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) || (err == nil && m.GetEnd() != nil) {
			break
		}
		if err != nil {
			return err
		}
	}
	busy := s.puts.Add(1) == 1
	res := &kvringv1.PutResult{}
	for i := range n {
		r := &kvringv1.PutChunkResult{Index: uint32(i), Status: kvringv1.PutStatus_PUT_STATUS_STORED,
			Holders: []*kvringv1.NodeRef{{NodeId: "n1", GrpcAddr: "x"}}}
		if busy && i == 1 {
			r = &kvringv1.PutChunkResult{Index: uint32(i), Status: kvringv1.PutStatus_PUT_STATUS_FAILED, Code: uint32(codes.Aborted),
				Reason: "node n1: another write of this chunk ended without storing it (declined or aborted); retry"}
		}
		res.Results = append(res.Results, r)
	}
	return stream.Send(&kvringv1.PutResponse{Epoch: 1, Msg: &kvringv1.PutResponse_Result{Result: res}})
}

// TestAChunkAnotherWriteHeldUpIsPutAgain: a chunk answered failed because
// another write of it was under way (code ABORTED) is put once more by the
// client, and its second result is what the caller sees; the other chunks
// are not sent again.
func TestAChunkAnotherWriteHeldUpIsPutAgain(t *testing.T) {
	t.Parallel()
	srv := &busyOnceCache{}
	c := fakeNodeClient(t, srv, nil)
	chunks := []Chunk{{ID: ChunkID{1}, Data: []byte("a")}, {ID: ChunkID{2}, Data: []byte("b")}, {ID: ChunkID{3}, Data: []byte("c")}}
	res, err := c.Put(context.Background(), chunks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != Stored || r.ID != chunks[i].ID {
			t.Fatalf("chunk %d: %+v, want stored", i, r)
		}
	}
	if got := srv.puts.Load(); got != 2 {
		t.Fatalf("%d put calls, want 2 (the batch, then the busy chunk)", got)
	}
}
