package coord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/owner"
	"github.com/kvring/kvring/node/internal/tenant"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// putStream is the engine's side of a Put call.
type putStream = grpc.BidiStreamingServer[kvringv1.PutRequest, kvringv1.PutResponse]

// put runs one engine Put stream: begin, need, data, end, result; or, for an
// eager engine, begin, data, end, result (the need exchange skipped: bytes
// nobody needs are discarded as they arrive). The write is a writeTx whose
// data phase is the stream (streamData). Bad input ends the call with
// InvalidArgument; an unknown namespace or a schema mismatch with
// FailedPrecondition; everything about a chunk's fate is in its result.
func (c *Coordinator) put(stream putStream) error {
	defer metrics.ObserveSince(c.m.PutSeconds, time.Now())
	ctx := stream.Context()
	begin, err := c.readBegin(stream)
	if err != nil {
		return transfer.ToStatus(err)
	}
	data := &streamData{stream: stream, eager: begin.GetEager()}
	tx, err := c.newPlacedWrite(begin, data)
	if err != nil {
		return transfer.ToStatus(err)
	}
	settled, err := tx.run(ctx)
	if err != nil {
		if errors.Is(err, errNeedNotSent) {
			return data.sendErr // the engine went away: its stream's own error
		}
		return transfer.ToStatus(err)
	}
	results := tx.results()
	c.countPut(results, tx.chunks)
	if data.eager {
		results = append(settled, results...)
	}
	return stream.Send(&kvringv1.PutResponse{Epoch: c.epoch(), Msg: &kvringv1.PutResponse_Result{
		Result: &kvringv1.PutResult{Results: results}}})
}

// readBegin reads the stream's begin message. One that does not come within
// the stream's begin deadline (beginDeadline: IdleTimeout and up to half
// of it again) ends the put (errIdleStream): a stream that never begins
// holds a handler, and counts against its connection's stream limit. Past
// MaxAwaitingBegin of its client's streams, it waits for a reader first
// (beginGate) and is refused with ResourceExhausted (counted) if none
// frees before that deadline.
func (c *Coordinator) readBegin(stream putStream) (*kvringv1.PutBegin, error) {
	var expire <-chan time.Time
	if d := beginDeadline(c.cfg.IdleTimeout); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		expire = t.C
	}
	ctx := stream.Context()
	leave, err := c.begins.enter(ctx, tenant.From(ctx), expire)
	if err != nil {
		if errors.Is(err, errTooManyAwaitingBegin) && c.m != nil {
			c.m.PutBeginRefused.Inc()
		}
		return nil, err
	}
	defer leave()
	first, err := c.recvBegin(stream, expire)
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: put stream ended before its begin message", transfer.ErrInvalidArgument)
	}
	if err != nil {
		return nil, err
	}
	begin := first.GetBegin()
	if begin == nil {
		return nil, fmt.Errorf("%w: the first put message must be begin", transfer.ErrInvalidArgument)
	}
	return begin, nil
}

// recvBegin receives the stream's first message, on a receiver the
// coordinator owns (Close waits for it), unless expire fires first: then
// it returns errIdleStream and leaves the receiver to end when gRPC
// cancels the stream. One timer, no ticker: a stream that never begins
// costs a handler, a receiver and a timer. nil expire: no deadline.
func (c *Coordinator) recvBegin(stream putStream, expire <-chan time.Time) (*kvringv1.PutRequest, error) {
	if expire == nil {
		m, err := stream.Recv()
		if err != nil && !errors.Is(err, io.EOF) {
			err = transfer.RecvError(err)
		}
		return m, err
	}
	type recvd struct {
		m   *kvringv1.PutRequest
		err error
	}
	got := make(chan recvd, 1) // the receiver may outlive the handler: nothing shared but this
	if !c.recv.start(func() {
		m, err := stream.Recv()
		got <- recvd{m, err}
	}) {
		return nil, errClosing
	}
	select {
	case r := <-got:
		if r.err != nil && !errors.Is(r.err, io.EOF) {
			r.err = transfer.RecvError(r.err)
		}
		return r.m, r.err
	case <-expire:
		return nil, fmt.Errorf("no begin message: %w: none came within the begin deadline (%s and up to half again)",
			errIdleStream, c.cfg.IdleTimeout)
	}
}

// newPlacedWrite checks a put's (or a publish's) begin message and places
// its chunks on the ring: a write of engine chunks.
func (c *Coordinator) newPlacedWrite(begin *kvringv1.PutBegin, data dataPhase) (*writeTx, error) {
	_, rec, err := c.reg.Resolve(begin.GetNamespace())
	if err != nil {
		return nil, err
	}
	if _, err := owner.ValidateChunks(begin.GetChunks(), c.local.MaxChunk(), c.cfg.MaxBatch); err != nil {
		return nil, err
	}
	rawIDs := make([][]byte, len(begin.GetChunks()))
	for i, ch := range begin.GetChunks() {
		rawIDs[i] = ch.GetId()
	}
	pl, err := place(rec, rawIDs, begin.GetGroups())
	if err != nil {
		return nil, err
	}
	tx := &writeTx{c: c, ref: nsRef(rec), chunks: begin.GetChunks(), keys: pl.keys, grouped: pl.grouped, data: data,
		shares: map[string]*ownerShare{}}
	tx.replicas, tx.minReplicas = replication(rec)
	if err := tx.place(); err != nil {
		return nil, err
	}
	return tx, nil
}

// errNeedNotSent: the need message could not be sent (the engine went
// away); streamData.sendErr is the stream's error, which ends the call as
// it is.
var errNeedNotSent = errors.New("cannot send the need message")

// streamData is the data phase of an engine's Put: the engine is told
// which chunks' bytes are needed (unless it is eager and sends them all),
// and its frames are forwarded to the owners as they arrive.
type streamData struct {
	stream putStream
	eager  bool // the engine sends every chunk's bytes without a need message (PutBegin.eager)
	// sendErr is the stream's error when the need message could not be sent.
	sendErr error
}

func (d *streamData) slot(*writeTx, *ownerShare) owner.SlotFunc { return nil }

func (d *streamData) deliver(_ context.Context, tx *writeTx, settled []*kvringv1.PutChunkResult) error {
	if !d.eager { // an eager engine sends every chunk's bytes without asking, and hears only the result
		if err := d.stream.Send(&kvringv1.PutResponse{Epoch: tx.c.epoch(), Msg: &kvringv1.PutResponse_Need{
			Need: &kvringv1.PutNeed{Need: tx.need, Settled: settled}}}); err != nil {
			d.sendErr = err
			return errNeedNotSent
		}
	}
	tx.c.countPut(settled, tx.chunks)
	return d.receive(tx)
}

// receive takes the engine's frames and forwards each to the owners that
// need it. Bad framing or a short stream is an error: the write is given up.
func (d *streamData) receive(tx *writeTx) error {
	p := newProgress(tx.c.cfg.Now())
	seen := func(n int) { p.seen(tx.c.cfg.Now(), n) }
	if len(tx.need) == 0 {
		return tx.c.idleWatch(func() error { return drainPut(d.stream, seen) }, p, 0)
	}
	needed := make(map[uint32]bool, len(tx.need))
	var want int64
	for _, idx := range tx.need {
		needed[idx] = true
		want += int64(tx.chunks[idx].GetSize())
	}
	asm := transfer.NewAssembler(tx.chunks, needed)
	for idx, s := range tx.sinks {
		_ = asm.SetSink(idx, s) // idx is needed: SetSink cannot fail
	}
	return tx.c.idleWatch(func() error { return receiveFrames(d.stream, asm, seen) }, p, want)
}

// receiveFrames reads data frames until end or half-close. A stream that
// ends with chunks still short is bad input. Frame bytes are not copied out
// of gRPC's receive buffers: each frame goes to its sink and is released.
func receiveFrames(stream putStream, asm *transfer.Assembler, seen func(n int)) error {
	in := transfer.InFrame{Msg: new(kvringv1.PutRequest), Field: transfer.PutDataField}
	defer in.Release()
	for {
		err := stream.RecvMsg(&in)
		var f transfer.Frame
		isFrame := false
		if err == nil {
			f, isFrame = in.Frame()
		}
		seen(f.Len())
		if errors.Is(err, io.EOF) || (err == nil && in.Msg.(*kvringv1.PutRequest).GetEnd() != nil) {
			if missing := asm.Missing(); len(missing) > 0 {
				return fmt.Errorf("%w: the put stream ended before the bytes of chunks %v were complete", transfer.ErrIncompleteStream, missing)
			}
			return nil
		}
		if err != nil {
			return transfer.RecvError(err)
		}
		if !isFrame {
			return fmt.Errorf("%w: a second begin in one put stream", transfer.ErrInvalidArgument)
		}
		_, err = asm.AddFrame(f)
		in.Release()
		if err != nil {
			return err
		}
	}
}

// drainPut waits for the engine's end when no bytes are needed. Frames for
// chunks nobody needs are ignored, without being copied.
func drainPut(stream putStream, seen func(n int)) error {
	in := transfer.InFrame{Msg: new(kvringv1.PutRequest), Field: transfer.PutDataField}
	defer in.Release()
	for {
		err := stream.RecvMsg(&in)
		seen(0)
		in.Release()
		if errors.Is(err, io.EOF) || (err == nil && in.Msg.(*kvringv1.PutRequest).GetEnd() != nil) {
			return nil
		}
		if err != nil {
			return transfer.RecvError(err)
		}
	}
}
