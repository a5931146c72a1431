package transfer

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

func TestDataFieldNumbers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		msg   proto.Message
		field protowire.Number
	}{{&kvringv1.PutRequest{}, PutDataField}, {&kvringv1.PrepareRequest{}, PrepareDataField},
		{&kvringv1.GetResponse{}, GetDataField}, {&kvringv1.FetchResponse{}, FetchDataField}} {
		fd := c.msg.ProtoReflect().Descriptor().Fields().ByName("data")
		if fd == nil || fd.Number() != c.field || fd.Message().FullName() != "kvring.v1.DataFrame" {
			t.Fatalf("%T.data: %v, want DataFrame field %d", c.msg, fd, c.field)
		}
	}
	df := (&kvringv1.DataFrame{}).ProtoReflect().Descriptor().Fields()
	for name, num := range map[string]protowire.Number{"index": 1, "offset": 2, "data": 3} {
		if f := df.ByName(protoreflect.Name(name)); f == nil || f.Number() != num {
			t.Fatalf("DataFrame.%s: %v, want field %d", name, f, num)
		}
	}
}

// splitPieces cuts b into pieces of random lengths (some a single byte, so
// varints straddle pieces), as gRPC's receive buffers would hold it, each a
// buffer of pool.
func splitPieces(rng *rand.Rand, b []byte, pool mem.BufferPool) mem.BufferSlice {
	var out mem.BufferSlice
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(3))
		if rng.IntN(4) == 0 {
			n = min(len(b), 1+rng.IntN(40_000))
		}
		buf := pool.Get(n)
		copy(*buf, b[:n])
		out = append(out, mem.NewBuffer(buf, pool))
		b = b[n:]
	}
	return out
}

// countingPool counts the buffers handed back to it.
type countingPool struct{ put atomic.Int64 }

func (p *countingPool) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (p *countingPool) Put(*[]byte)       { p.put.Add(1) }

func TestOutFrameEncodesAsProtobuf(t *testing.T) {
	t.Parallel()
	codec := NewCodec()
	data := pattern(7, 70_000)
	for _, c := range []struct {
		index  uint32
		offset uint64
		pieces [][]byte
	}{
		{0, 0, [][]byte{data[:1]}},
		{3, 0, [][]byte{data}},
		{0, 1 << 40, [][]byte{data[:100], data[100:5000], nil, data[5000:]}},
		{^uint32(0), ^uint64(0), [][]byte{data[:16384], data[16384:32768]}},
		{5, 9, nil}, // no bytes: protobuf leaves the field out
		{0, 0, [][]byte{data[:10:10], data[10:2000:2000], data[2000:2005:2005]}}, // small pieces are copied
	} {
		for _, borrow := range []bool{false, true} {
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{
				Data: &kvringv1.DataFrame{Index: c.index, Offset: c.offset, Data: slices.Concat(c.pieces...)}}})
			if err != nil {
				t.Fatal(err)
			}
			var lender Lender
			out, err := codec.Marshal(&OutFrame{Field: PutDataField, Index: c.index, Offset: c.offset, Data: c.pieces, Borrow: borrow, Lender: &lender})
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Materialize(); !bytes.Equal(got, want) {
				t.Fatalf("index %d offset %d borrow %v: %d bytes differ from protobuf's %d", c.index, c.offset, borrow, len(got), len(want))
			}
			// Borrowed pieces over 1 KiB are the caller's bytes, not copies,
			// and each is lent until gRPC frees it.
			aliased, lendable := 0, 0
			for _, p := range c.pieces {
				if len(p) > 0 && cap(p) > 1024 {
					lendable++
				}
				for _, b := range out {
					if len(p) > 0 && len(b.ReadOnlyData()) > 0 && &b.ReadOnlyData()[0] == &p[0] {
						aliased++
					}
				}
			}
			if want := map[bool]int{false: 0, true: lendable}[borrow]; aliased != want || lender.Outstanding() != int64(want) {
				t.Fatalf("borrow %v: %d pieces aliased and %d lent, want %d", borrow, aliased, lender.Outstanding(), want)
			}
			out.Free()
			if lender.Outstanding() != 0 || !lender.Wait(time.Second) {
				t.Fatalf("borrow %v: %d pieces still lent after gRPC freed the message", borrow, lender.Outstanding())
			}
		}
	}
	if _, err := codec.Marshal(&OutFrame{Field: 0, Data: [][]byte{data}}); err == nil {
		t.Fatal("field number 0 encoded without an error")
	}
	if _, err := codec.Marshal(&OutFrame{Field: PutDataField, Data: [][]byte{data}, Borrow: true}); err == nil {
		t.Fatal("a borrowed frame without a Lender encoded without an error")
	}
}

// TestInFrameReadsFramesInPlace: a data frame decoded through InFrame points
// into the received buffers (no copy), which stay out of the pool until
// Release, while other messages decode into Msg.
func TestInFrameReadsFramesInPlace(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	codec := NewCodec()
	data := pattern(3, 3<<17)
	msgs := []*kvringv1.PutRequest{
		{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{Chunks: []*kvringv1.ChunkRef{{Id: data[:32], Size: 9}}}}},
		{Msg: &kvringv1.PutRequest_Data{Data: &kvringv1.DataFrame{Index: 5, Offset: 1 << 20, Data: data}}},
		{Msg: &kvringv1.PutRequest_Data{Data: &kvringv1.DataFrame{Data: data[:1]}}},
		{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}},
	}
	in := InFrame{Msg: new(kvringv1.PutRequest), Field: PutDataField}
	for round := range 20 {
		for _, m := range msgs {
			wire, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			pool := &countingPool{}
			bufs := splitPieces(rng, wire, pool)
			if err := codec.Unmarshal(bufs, &in); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			bufs.Free() // as gRPC does once Unmarshal returns
			f, ok := in.Frame()
			want := m.GetData()
			if ok != (want != nil) {
				t.Fatalf("round %d: Frame() ok %v for %v", round, ok, m)
			}
			if !ok {
				if !proto.Equal(in.Msg, m) {
					t.Fatalf("round %d: decoded %v, want %v", round, in.Msg, m)
				}
				continue
			}
			if f.Index != want.GetIndex() || f.Offset != want.GetOffset() || !bytes.Equal(slices.Concat(f.Data...), want.GetData()) {
				t.Fatalf("round %d: frame %d@%d of %d bytes, want %d@%d of %d", round, f.Index, f.Offset, f.Len(), want.GetIndex(), want.GetOffset(), len(want.GetData()))
			}
			if in.Msg.(*kvringv1.PutRequest).GetMsg() != nil {
				t.Fatalf("round %d: Msg still holds the previous message", round)
			}
			for _, p := range f.Data {
				if !inside(p, bufs) {
					t.Fatalf("round %d: a piece of the frame is a copy, not the received buffer", round)
				}
			}
			if got := pool.put.Load(); got != 0 {
				t.Fatalf("round %d: %d buffers went back to the pool while the frame is held", round, got)
			}
			in.Release()
			pooled := int64(0) // mem.NewBuffer does not pool small buffers
			for _, b := range bufs {
				if _, small := b.(mem.SliceBuffer); !small {
					pooled++
				}
			}
			if got := pool.put.Load(); got != pooled || (pooled == 0 && f.Len() > 100_000) {
				t.Fatalf("round %d: %d of %d pooled buffers back in the pool after Release", round, got, pooled)
			}
			in.Release() // idempotent
		}
	}
}

// TestInFrameKeepsTheEpochBesideTheFrame: a GetResponse data message
// carries the epoch before the frame; it is decoded into Msg while the frame
// stays in the received buffers.
func TestInFrameKeepsTheEpochBesideTheFrame(t *testing.T) {
	t.Parallel()
	data := pattern(4, 100_000)
	wire, err := proto.Marshal(&kvringv1.GetResponse{Epoch: 1 << 33, Msg: &kvringv1.GetResponse_Data{
		Data: &kvringv1.DataFrame{Index: 2, Offset: 4096, Data: data}}})
	if err != nil {
		t.Fatal(err)
	}
	bufs := splitPieces(rand.New(rand.NewPCG(5, 6)), wire, mem.DefaultBufferPool())
	in := InFrame{Msg: &kvringv1.GetResponse{Epoch: 7, Msg: &kvringv1.GetResponse_Header{}}, Field: GetDataField}
	defer in.Release()
	if err := NewCodec().Unmarshal(bufs, &in); err != nil {
		t.Fatal(err)
	}
	f, ok := in.Frame()
	m := in.Msg.(*kvringv1.GetResponse)
	if !ok || f.Index != 2 || f.Offset != 4096 || !bytes.Equal(slices.Concat(f.Data...), data) {
		t.Fatalf("frame %v %d@%d (%d bytes)", ok, f.Index, f.Offset, f.Len())
	}
	if m.GetEpoch() != 1<<33 || m.GetMsg() != nil {
		t.Fatalf("Msg %v: want the epoch alone", m)
	}
	for _, p := range f.Data {
		if !inside(p, bufs) {
			t.Fatal("a piece of the frame is a copy, not the received buffer")
		}
	}
}

// inside reports whether p lies within one of the buffers.
func inside(p []byte, bufs mem.BufferSlice) bool {
	if len(p) == 0 {
		return true
	}
	start := uintptr(unsafe.Pointer(&p[0]))
	for _, b := range bufs {
		d := b.ReadOnlyData()
		if len(d) == 0 {
			continue
		}
		lo := uintptr(unsafe.Pointer(&d[0]))
		if start >= lo && start+uintptr(len(p)) <= lo+uintptr(len(d)) {
			return true
		}
	}
	return false
}

// TestInFrameAgreesWithProtobuf: whatever the bytes (valid frames in unusual
// encodings, truncated or corrupted messages), InFrame decodes exactly what
// protobuf does, and fails when protobuf fails, for a message whose only
// field is the frame (PutRequest) and one with an epoch before it
// (GetResponse).
func TestInFrameAgreesWithProtobuf(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	bytesField := func(num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
	}
	data := pattern(9, 5000)
	for _, typ := range []struct {
		field protowire.Number
		msg   func() framed
	}{
		{PutDataField, func() framed { return new(kvringv1.PutRequest) }},
		{GetDataField, func() framed { return new(kvringv1.GetResponse) }},
	} {
		frame := func(fields ...[]byte) []byte { // the message's frame field holding fields, in this order
			return bytesField(typ.field, slices.Concat(fields...))
		}
		seeds := [][]byte{
			frame(varint(1, 2), varint(2, 7), bytesField(3, data)),
			frame(bytesField(3, data), varint(1, 2)),                                                          // data before index
			frame(varint(2, 7), varint(1, 2), bytesField(3, data)),                                            // out of order
			frame(varint(1, 2), varint(1, 3), bytesField(3, data)),                                            // repeated index
			frame(varint(1, 1<<33), bytesField(3, data)),                                                      // index beyond uint32
			frame(varint(1, 2), bytesField(3, data[:10]), bytesField(3, data)),                                // repeated data
			frame(varint(9, 1), bytesField(3, data)),                                                          // unknown field
			append(frame(varint(1, 2), bytesField(3, data)), frame(varint(1, 4), bytesField(3, data[:3]))...), // two frames: merged
			append(frame(bytesField(3, data)), varint(1, 1)...),                                               // a field after the frame
			slices.Concat(varint(1, 1<<40), frame(varint(1, 2), bytesField(3, data))),                         // epoch first
			slices.Concat(varint(1, 5), varint(1, 6), varint(7, 1), frame(bytesField(3, data))),               // repeated and unknown varints first
			slices.Concat(bytesField(2, []byte{8, 1}), frame(bytesField(3, data))),                            // another message first
			slices.Concat(protowire.AppendTag(nil, 4, protowire.Fixed64Type), make([]byte, 8), frame()),       // a fixed64 first
			frame(),
			frame(append(protowire.AppendTag(nil, 1, protowire.VarintType), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02), bytesField(3, data)), // a varint that overflows
			frame(append(protowire.AppendTag(nil, 2, protowire.VarintType), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), bytesField(3, data)), // the largest varint
		}
		codec := NewCodec()
		check := func(wire []byte) {
			want := typ.msg()
			wantErr := proto.Unmarshal(wire, want)
			in := InFrame{Msg: typ.msg(), Field: typ.field}
			defer in.Release()
			err := codec.Unmarshal(splitPieces(rng, wire, mem.DefaultBufferPool()), &in)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%T %x: InFrame error %v, protobuf error %v", want, wire, err, wantErr)
			}
			if err != nil {
				return
			}
			f, ok := in.Frame()
			w := want.GetData()
			if ok != (w != nil) {
				t.Fatalf("%T %x: frame %v, protobuf decoded %v", want, wire, ok, want)
			}
			if ok && (f.Index != w.GetIndex() || f.Offset != w.GetOffset() || !bytes.Equal(slices.Concat(f.Data...), w.GetData())) {
				t.Fatalf("%T %x: frame %d@%d (%d bytes), protobuf %d@%d (%d bytes)", want, wire, f.Index, f.Offset, f.Len(), w.GetIndex(), w.GetOffset(), len(w.GetData()))
			}
			// Everything but the frame's bytes is in Msg, as protobuf has it.
			if ok {
				clone := proto.Clone(want).(framed)
				if d := clone.GetData(); d != nil {
					proto.Reset(d)
				}
				got := proto.Clone(in.Msg).(framed)
				if d := got.GetData(); d != nil {
					proto.Reset(d)
				}
				clone.ProtoReflect().Clear(clone.ProtoReflect().Descriptor().Fields().ByNumber(typ.field))
				got.ProtoReflect().Clear(got.ProtoReflect().Descriptor().Fields().ByNumber(typ.field))
				if !proto.Equal(got, clone) {
					t.Fatalf("%T %x: decoded %v beside the frame, protobuf %v", want, wire, got, clone)
				}
			} else if !proto.Equal(in.Msg, want) {
				t.Fatalf("%T %x: decoded %v, protobuf %v", want, wire, in.Msg, want)
			}
		}
		for _, s := range seeds {
			check(s)
			for range 300 { // truncations and byte flips of each seed
				b := slices.Clone(s)
				switch rng.IntN(3) {
				case 0:
					b = b[:rng.IntN(len(b)+1)]
				default:
					if len(b) > 0 {
						b[rng.IntN(min(len(b), 24))] ^= byte(1 << rng.IntN(8))
					}
				}
				check(b)
			}
		}
	}
}
