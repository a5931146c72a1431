package coord

import (
	"context"
	"errors"
	"time"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// ChunkSink receives the answer of a read (Coordinator.GetChunks), chunk by
// chunk in request order: for each index either Found and then its bytes
// in order through Data, or Miss. Each front end (the gRPC Cache service,
// the Redis-protocol port, the local socket) is one ChunkSink. Its methods
// are called from the reading goroutine only, one at a time; an error
// from one ends the read with that error.
type ChunkSink interface {
	// Found starts chunk h.Index, which a member holds with bytes that
	// passed their checksum: h.Chunk has its size and CRC-32C, h.Holder the
	// member. The sink may keep h.
	Found(h *kvringv1.ChunkHeader) error
	// Data is bytes of chunk i (the one Found last started) at offset off;
	// the calls of a chunk cover its bytes in order, without gaps. b is
	// lent: it is valid only until Data returns (the sink copies what it
	// keeps) and must not be changed.
	Data(i uint32, off uint64, b []byte) error
	// Miss says that no member could send chunk i: err is a *MissError,
	// wrapping store.ErrNotFound or transfer.ErrUnavailable.
	Miss(i uint32, err error) error
}

// FrameSink is a ChunkSink that takes the bytes this node's store holds as
// encoded frames (the gRPC stream hands their buffers to gRPC: no copy
// past the one out of the store). Bytes fetched from other members still
// come through Data.
type FrameSink interface {
	ChunkSink
	// Frame is a data frame of the chunk Found last started, encoded for
	// GetResponse's data field. Frame takes f: it sends it (handing its
	// buffer on) or Releases it, also when it fails.
	Frame(f *transfer.EncodedFrame) error
}

// MissError is why no member could send a chunk. The one place that
// decides a miss (getTx.serve) makes it: Unavailable when a member that may
// hold the chunk did not answer or left the ring dead lately (it wraps
// transfer.ErrUnavailable), else every such member answered that it does
// not hold it (it wraps store.ErrNotFound).
type MissError struct {
	Unavailable bool
	// Reason is one reason per member asked: "node a: not held; node b: ...".
	Reason string
}

func (e *MissError) Unwrap() error {
	if e.Unavailable {
		return transfer.ErrUnavailable
	}
	return store.ErrNotFound
}

func (e *MissError) Error() string { return e.Unwrap().Error() + ": " + e.Reason }

// MissHeader is the wire header of a miss of chunk i (as the Cache
// service's Get sends it): status UNAVAILABLE for an err wrapping
// transfer.ErrUnavailable, else NOT_FOUND; the reason is a MissError's, else
// err's text.
func MissHeader(i uint32, err error) *kvringv1.ChunkHeader {
	h := &kvringv1.ChunkHeader{Index: i, Status: kvringv1.ReadStatus_READ_STATUS_NOT_FOUND, Reason: err.Error()}
	if errors.Is(err, transfer.ErrUnavailable) {
		h.Status = kvringv1.ReadStatus_READ_STATUS_UNAVAILABLE
	}
	if me, ok := errors.AsType[*MissError](err); ok {
		h.Reason = me.Reason
	}
	return h
}

// GetChunks reads the chunks req names (its ids, placed by its groups) into
// sink, in order: each from the first member that holds it with bytes that
// pass their checksum, else a Miss (see MissError). Bytes that fail their
// checksum are never given to sink. It returns an error when the request
// is refused (an unknown namespace, bad ids: domain errors of transfer) or
// when sink fails; a chunk no member could send is not an error. It blocks
// until every chunk was given to sink or ctx ends.
func (c *Coordinator) GetChunks(ctx context.Context, req *kvringv1.GetRequest, sink ChunkSink) error {
	defer metrics.ObserveSince(c.m.GetSeconds, time.Now())
	g, err := c.beginGet(ctx, req)
	if err != nil {
		return err
	}
	g.setSink(sink)
	return g.run()
}

// setSink makes sink the reader of g's answer.
func (g *getTx) setSink(sink ChunkSink) {
	g.sink = sink
	g.send = sendTo(sink)
}

// sendTo adapts sink to the owner's SendFunc (this node's store's frames):
// a FrameSink takes the frames, any other sink their bytes (the frame is
// released once Data returns).
func sendTo(sink ChunkSink) owner.SendFunc {
	if fs, ok := sink.(FrameSink); ok {
		return func(h *kvringv1.ChunkHeader, f *transfer.EncodedFrame) error {
			if h != nil {
				return sink.Found(h)
			}
			return fs.Frame(f)
		}
	}
	var idx uint32
	var off uint64
	return func(h *kvringv1.ChunkHeader, f *transfer.EncodedFrame) error {
		if h != nil {
			idx, off = h.GetIndex(), 0
			return sink.Found(h)
		}
		defer f.Release()
		b := f.Data()
		err := sink.Data(idx, off, b)
		off += uint64(len(b))
		return err
	}
}

// run serves every id in order.
func (g *getTx) run() error {
	g.c.cfg.Load.Add()
	fctx, cancel := context.WithCancel(g.ctx)
	defer cancel()
	g.openStreams(fctx)
	defer g.noteStreams()
	for i, id := range g.ids {
		if err := g.serve(uint32(i), id); err != nil {
			return err // the reader went away
		}
	}
	return nil
}
