package transfer

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// Codec is the gRPC codec of kvring's servers and clients. It registers
// under gRPC's protobuf name ("proto") and puts the same bytes on the wire as
// gRPC's own codec, which it calls for every message but two wrapper types
// that move a data frame's bytes without the copies protobuf makes:
//
//   - *OutFrame, given to a stream's SendMsg, is encoded as the message whose
//     field Field is the DataFrame{Index, Offset, Data}; with Borrow its
//     bytes go to the transport as they are, otherwise they are copied once
//     into a pooled buffer (protobuf would too).
//   - *InFrame, given to a stream's RecvMsg, decodes such a message without
//     copying the frame's bytes: they stay in gRPC's receive buffers, which
//     the InFrame holds until Release. Any other message (and a data frame in
//     a form the fast path does not read) is decoded into InFrame.Msg by
//     protobuf.
//
// A peer that uses gRPC's default codec reads and writes the same messages;
// only the copies differ. Install it with grpc.ForceServerCodecV2 on a server
// and grpc.ForceCodecV2 as a default call option on a client connection;
// nothing is registered globally. Safe for concurrent use.
type Codec struct {
	base encoding.CodecV2
}

// NewCodec returns the codec.
func NewCodec() Codec {
	return Codec{base: encoding.GetCodecV2(grpcproto.Name)}
}

// Name is gRPC's protobuf codec name, so the content-subtype is unchanged.
func (Codec) Name() string { return grpcproto.Name }

// Marshal encodes v: an *OutFrame as its data frame message, anything else
// with gRPC's protobuf codec.
func (c Codec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*OutFrame); ok {
		return f.marshal()
	}
	return c.base.Marshal(v)
}

// Unmarshal decodes data into v: an *InFrame as described on Codec, anything
// else with gRPC's protobuf codec.
func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if in, ok := v.(*InFrame); ok {
		return in.unmarshal(c.base, data)
	}
	return c.base.Unmarshal(data, v)
}

// Field numbers of the data frame in the messages that carry one
// (TestDataFieldNumbers checks them against the generated code).
const (
	PutDataField     protowire.Number = 2 // PutRequest.data
	PrepareDataField protowire.Number = 2 // PrepareRequest.data
	GetDataField     protowire.Number = 3 // GetResponse.data
	FetchDataField   protowire.Number = 3 // FetchResponse.data
)

// Frame is a received data frame: its chunk index, its offset, and its bytes
// in pieces, in order (gRPC's receive buffers, about 16 KiB each).
type Frame struct {
	Index  uint32
	Offset uint64
	Data   [][]byte
}

// Len is the frame's length in bytes.
func (f Frame) Len() int {
	n := 0
	for _, p := range f.Data {
		n += len(p)
	}
	return n
}

// OutFrame is a data frame to send with SendMsg through Codec: the message
// whose field Field (PutRequest.data and PrepareRequest.data are 2) is
// DataFrame{Index, Offset, Data}, Data being the pieces in order.
type OutFrame struct {
	Field  protowire.Number
	Index  uint32
	Offset uint64
	Data   [][]byte
	// Borrow hands Data's pieces to the transport without copying them
	// (pieces of 1 KiB or less are copied). gRPC writes them after SendMsg
	// returns, so they must stay unchanged until Lender.Wait returns.
	// Without Borrow, Marshal copies Data.
	Borrow bool
	// Lender, required with Borrow, learns when gRPC lets go of each borrowed
	// piece: once written, or dropped with a canceled stream.
	Lender *Lender
}

// Lender counts the pieces of memory Borrowed OutFrames lend to gRPC, so that
// their owner knows when gRPC no longer reads them. It is the mem.BufferPool
// of those pieces: gRPC "returns" each to it when done. One Lender per stream
// (or per call); safe for concurrent use. The zero value is ready.
type Lender struct {
	wg  sync.WaitGroup
	out atomic.Int64
}

// Get is never called for lent pieces; it allocates, as any pool may.
func (l *Lender) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

// Put records that gRPC let go of one lent piece.
func (l *Lender) Put(*[]byte) {
	l.out.Add(-1)
	l.wg.Done()
}

// Outstanding reports how many lent pieces gRPC still holds.
func (l *Lender) Outstanding() int64 { return l.out.Load() }

// Wait blocks until gRPC has let go of every piece lent so far, or timeout
// passes, and reports whether it did. gRPC lets go right after writing a
// piece, or when it drops a canceled stream's queued data; a write blocked
// on a peer that stopped reading holds its piece until the connection fails.
func (l *Lender) Wait(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

func (l *Lender) lend(p []byte) mem.Buffer {
	l.wg.Add(1)
	l.out.Add(1)
	return mem.NewBuffer(&p, l)
}

// marshal encodes the frame: field Field, length-delimited, holding
// DataFrame's fields in field order with zero scalars left out, as protobuf
// encodes them.
func (f *OutFrame) marshal() (mem.BufferSlice, error) {
	if f.Field < 1 || f.Field > protowire.MaxValidNumber {
		return nil, fmt.Errorf("data frame: field number %d out of range", f.Field)
	}
	n := uint64(0)
	for _, p := range f.Data {
		n += uint64(len(p))
	}
	var inner []byte
	if f.Index != 0 {
		inner = protowire.AppendTag(inner, 1, protowire.VarintType)
		inner = protowire.AppendVarint(inner, uint64(f.Index))
	}
	if f.Offset != 0 {
		inner = protowire.AppendTag(inner, 2, protowire.VarintType)
		inner = protowire.AppendVarint(inner, f.Offset)
	}
	if n > 0 { // proto3 leaves out an empty bytes field
		inner = protowire.AppendTag(inner, 3, protowire.BytesType)
		inner = protowire.AppendVarint(inner, n)
	}
	hdr := protowire.AppendTag(make([]byte, 0, 32), f.Field, protowire.BytesType)
	hdr = protowire.AppendVarint(hdr, uint64(len(inner))+n)
	hdr = append(hdr, inner...)
	if f.Borrow {
		if f.Lender == nil {
			return nil, fmt.Errorf("data frame: Borrow without a Lender")
		}
		// Small pieces are copied: gRPC would not track them (mem.NewBuffer
		// does not pool buffers of 1 KiB or less), and copying them is cheap.
		out := make(mem.BufferSlice, 0, 1+len(f.Data))
		small := hdr
		for _, p := range f.Data {
			if len(p) == 0 {
				continue
			}
			if mem.IsBelowBufferPoolingThreshold(cap(p)) {
				small = append(small, p...)
				continue
			}
			if len(small) > 0 {
				out = append(out, mem.SliceBuffer(small))
				small = nil
			}
			out = append(out, f.Lender.lend(p))
		}
		if len(small) > 0 {
			out = append(out, mem.SliceBuffer(small))
		}
		return out, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(len(hdr) + int(n))
	b := append((*buf)[:0], hdr...)
	for _, p := range f.Data {
		b = append(b, p...)
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// framed is a message of a stream that carries data frames: its frame, when
// it is one, as protobuf decoded it.
type framed interface {
	proto.Message
	GetData() *kvringv1.DataFrame
}

// InFrame receives one message of a stream that carries data frames, through
// Codec: set Msg and Field, pass the InFrame to the stream's RecvMsg, read
// Frame, and call Release when done with the frame's bytes. An InFrame can be
// used for message after message; each RecvMsg releases the previous
// message's buffers.
type InFrame struct {
	// Msg is the message type of the stream (a *PutRequest,
	// *PrepareRequest, *GetResponse or *FetchResponse). Every message that
	// is not read as a data frame is decoded into it by protobuf; for one
	// that is, Msg holds the fields before the frame (an epoch).
	Msg framed
	// Field is the data frame's field number in Msg.
	Field protowire.Number

	frame  Frame
	isData bool
	held   mem.BufferSlice
}

// Frame returns the received message's data frame, or false when the
// message is something else (then Msg holds it). The frame's bytes are
// valid until Release or the next RecvMsg; do not modify them.
func (in *InFrame) Frame() (Frame, bool) {
	if in.isData {
		return in.frame, true
	}
	if d := in.Msg.GetData(); d != nil {
		return Frame{Index: d.GetIndex(), Offset: d.GetOffset(), Data: [][]byte{d.GetData()}}, true
	}
	return Frame{}, false
}

// Release returns the buffers of the frame received last to gRPC's pool.
// Idempotent.
func (in *InFrame) Release() {
	if in.held != nil {
		in.held.Free()
		in.held = nil
	}
	in.frame = Frame{}
	in.isData = false
}

func (in *InFrame) unmarshal(base encoding.CodecV2, data mem.BufferSlice) error {
	in.Release()
	if in.Msg == nil {
		return fmt.Errorf("data frame: InFrame without a message to decode into")
	}
	if head, f, ok := readFrame(data, in.Field); ok {
		// The scalar fields before the frame (GetResponse.epoch) are a few
		// bytes: protobuf decodes them, which also resets Msg.
		if err := proto.Unmarshal(head, in.Msg); err != nil {
			return err
		}
		data.Ref()
		in.held, in.frame, in.isData = data, f, true
		return nil
	}
	return base.Unmarshal(data, in.Msg)
}

// readFrame reads data as a message whose last field is field, holding a
// DataFrame whose data field comes last, without copying the data bytes.
// Fields before it may only be varints (such as an epoch); their encoding is
// returned as head, for protobuf to decode. Anything else (a field of
// another type, the frame or its data not last, DataFrame's fields out of
// order, an index beyond uint32) is not ok: protobuf then decodes the
// message with its full rules.
func readFrame(data mem.BufferSlice, field protowire.Number) (head []byte, f Frame, ok bool) {
	r := pieceReader{pieces: make([][]byte, 0, len(data)), record: true}
	for _, b := range data {
		if d := b.ReadOnlyData(); len(d) > 0 {
			r.pieces = append(r.pieces, d)
		}
	}
	r.left = uint64(data.Len())
	for {
		n := len(r.rec)
		num, typ, ok := r.tag()
		if !ok {
			return nil, Frame{}, false
		}
		if num == field && typ == protowire.BytesType {
			head, r.record = r.rec[:n], false
			break
		}
		if typ != protowire.VarintType {
			return nil, Frame{}, false
		}
		if _, ok := r.varint(); !ok {
			return nil, Frame{}, false
		}
	}
	if n, ok := r.varint(); !ok || n != r.left {
		return nil, Frame{}, false
	}
	last := protowire.Number(0)
	for {
		num, typ, ok := r.tag()
		if !ok || num <= last {
			return nil, Frame{}, false
		}
		last = num
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, ok := r.varint()
			if !ok || v > math.MaxUint32 {
				return nil, Frame{}, false
			}
			f.Index = uint32(v)
		case num == 2 && typ == protowire.VarintType:
			v, ok := r.varint()
			if !ok {
				return nil, Frame{}, false
			}
			f.Offset = v
		case num == 3 && typ == protowire.BytesType:
			n, ok := r.varint()
			if !ok || n != r.left {
				return nil, Frame{}, false
			}
			f.Data = r.rest()
			return head, f, true
		default:
			return nil, Frame{}, false
		}
	}
}

// pieceReader reads protobuf's varints across buffer boundaries.
type pieceReader struct {
	pieces [][]byte
	left   uint64 // bytes not read yet
	record bool   // keep a copy of the bytes read in rec
	rec    []byte
}

func (r *pieceReader) byte() (byte, bool) {
	for len(r.pieces) > 0 && len(r.pieces[0]) == 0 {
		r.pieces = r.pieces[1:]
	}
	if len(r.pieces) == 0 {
		return 0, false
	}
	b := r.pieces[0][0]
	r.pieces[0] = r.pieces[0][1:]
	r.left--
	if r.record {
		r.rec = append(r.rec, b)
	}
	return b, true
}

// varint reads a varint as protowire does: at most 10 bytes, the tenth
// holding only the top bit (more is overflow, which protobuf rejects).
func (r *pieceReader) varint() (uint64, bool) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, ok := r.byte()
		if !ok || shift == 63 && b > 1 {
			return 0, false
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, true
		}
	}
	return 0, false
}

func (r *pieceReader) tag() (protowire.Number, protowire.Type, bool) {
	v, ok := r.varint()
	if !ok || v>>3 > uint64(protowire.MaxValidNumber) {
		return 0, 0, false
	}
	return protowire.Number(v >> 3), protowire.Type(v & 7), true
}

// rest returns the unread bytes, as pieces.
func (r *pieceReader) rest() [][]byte {
	out := make([][]byte, 0, len(r.pieces))
	for _, p := range r.pieces {
		if len(p) > 0 {
			out = append(out, p)
		}
	}
	r.pieces, r.left = nil, 0
	return out
}
