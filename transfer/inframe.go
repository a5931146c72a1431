package transfer

import (
	"fmt"
	"math"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/kvring/kvring/internal/crc32c"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
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

// AppendChecksum appends the frame's bytes to dst and returns it with crc (a
// CRC-32C, 0 to start) extended by them: one pass, the copy and the checksum
// together (crc32c.CopyChecksum). dst must have room for them: a reader sizes
// its buffer to the chunk from its header, so it is never reallocated.
func (f Frame) AppendChecksum(dst []byte, crc uint32) ([]byte, uint32) {
	for _, p := range f.Data {
		n := len(dst)
		dst = dst[:n+len(p)]
		crc = crc32c.CopyChecksum(dst[n:], p, crc)
	}
	return dst, crc
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
