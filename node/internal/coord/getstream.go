package coord

import (
	"time"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/node/internal/metrics"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// get is the Cache service's Get: GetChunks with a gRPC stream as its sink
// (streamSink). A refused request is answered with its gRPC status.
func (c *Coordinator) get(req *kvringv1.GetRequest, stream grpc.ServerStreamingServer[kvringv1.GetResponse]) error {
	defer metrics.ObserveSince(c.m.GetSeconds, time.Now())
	g, err := c.beginGet(stream.Context(), req)
	if err != nil {
		return transfer.ToStatus(err)
	}
	g.setSink(&streamSink{stream: stream, epoch: g.epoch})
	return g.run()
}

// streamSink writes a read's answer to a Get stream: a GetResponse header
// per chunk (with the ring's epoch), and its bytes as data frames of at
// most transfer.MaxFrameBytes.
type streamSink struct {
	stream grpc.ServerStreamingServer[kvringv1.GetResponse]
	epoch  uint64
}

func (s *streamSink) Found(h *kvringv1.ChunkHeader) error { return s.header(h) }

func (s *streamSink) Miss(i uint32, err error) error {
	return s.header(MissHeader(i, err))
}

func (s *streamSink) header(h *kvringv1.ChunkHeader) error {
	return s.stream.Send(&kvringv1.GetResponse{Epoch: s.epoch, Msg: &kvringv1.GetResponse_Header{Header: h}})
}

// Frame sends a frame of this node's store: gRPC takes its buffer, no
// protobuf (the engine reads the epoch from headers).
func (s *streamSink) Frame(f *transfer.EncodedFrame) error {
	if err := s.stream.SendMsg(f); err != nil {
		f.Release() // in case gRPC failed before it took it
		return err
	}
	return nil
}

// Data sends fetched bytes as transfer.OutFrames: one copy into an
// uncleared buffer each (made before SendMsg returns), no protobuf.
func (s *streamSink) Data(i uint32, off uint64, b []byte) error {
	for k := 0; k < len(b); k += transfer.MaxFrameBytes {
		end := min(k+transfer.MaxFrameBytes, len(b))
		f := &transfer.OutFrame{Field: transfer.GetDataField, Index: i, Offset: off + uint64(k), Data: [][]byte{b[k:end:end]}}
		if err := s.stream.SendMsg(f); err != nil {
			return err
		}
	}
	return nil
}
