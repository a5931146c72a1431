package transfer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// fuzzStreams are the four messages that carry data frames, with their data
// field: what kind picks in the fuzz targets.
var fuzzStreams = []struct {
	field protowire.Number
	new   func() framed
	clear func(framed) // drops the oneof, leaving the other fields
}{
	{PutDataField, func() framed { return new(kvringv1.PutRequest) }, func(m framed) { m.(*kvringv1.PutRequest).Msg = nil }},
	{PrepareDataField, func() framed { return new(kvringv1.PrepareRequest) }, func(m framed) { m.(*kvringv1.PrepareRequest).Msg = nil }},
	{GetDataField, func() framed { return new(kvringv1.GetResponse) }, func(m framed) { m.(*kvringv1.GetResponse).Msg = nil }},
	{FetchDataField, func() framed { return new(kvringv1.FetchResponse) }, func(m framed) { m.(*kvringv1.FetchResponse).Msg = nil }},
}

// FuzzInFrameDecode feeds arbitrary bytes, cut into arbitrary pieces, to
// InFrame (the zero-copy decoder of every data-carrying stream, which reads
// what peers and engines send) and checks it against protobuf, the
// reference: it fails exactly when protobuf does, and otherwise yields the
// same frame and the same other fields, whether or not its fast path took
// the message. It must never panic, and Release hands every pooled buffer
// back once.
func FuzzInFrameDecode(f *testing.F) {
	frame := &kvringv1.DataFrame{Index: 3, Offset: 1 << 20, Data: pattern(1, 300)}
	for _, m := range []proto.Message{
		&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: frame}},
		&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{Chunks: []*kvringv1.ChunkRef{{Id: make([]byte, 32), Size: 9}}}}},
		&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}},
		&kvringv1.GetResponse{Epoch: 1 << 33, Msg: &kvringv1.GetResponse_Data{Data: frame}},
		&kvringv1.GetResponse{Epoch: 7, Msg: &kvringv1.GetResponse_Data{Data: &kvringv1.DataFrame{}}},
		&kvringv1.FetchResponse{Epoch: 1, Msg: &kvringv1.FetchResponse_Data{Data: &kvringv1.DataFrame{Index: ^uint32(0), Offset: ^uint64(0), Data: []byte{1}}}},
	} {
		wire, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		kind := uint8(0)
		if _, ok := m.(*kvringv1.GetResponse); ok {
			kind = 2
		} else if _, ok := m.(*kvringv1.FetchResponse); ok {
			kind = 3
		}
		f.Add(wire, kind, uint64(1))
		f.Add(wire, kind, uint64(0xdeadbeef))
	}
	// Hand-made oddities: a frame field before a varint, DataFrame fields out
	// of order, a length past the end, an over-long varint, an index beyond
	// uint32, the data field repeated.
	f.Add([]byte{0x12, 0x05, 0x1a, 0x01, 0xff, 0x08, 0x01}, uint8(0), uint64(2))
	f.Add([]byte{0x12, 0x06, 0x10, 0x01, 0x08, 0x01, 0x1a, 0x00}, uint8(0), uint64(3))
	f.Add([]byte{0x12, 0x7f, 0x1a, 0x7d}, uint8(1), uint64(4))
	f.Add([]byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x1a, 0x00}, uint8(2), uint64(5))
	f.Add([]byte{0x1a, 0x07, 0x08, 0x80, 0x80, 0x80, 0x80, 0x10, 0x1a, 0x00}, uint8(3), uint64(6))
	f.Add([]byte{0x12, 0x03, 0x1a, 0x01, 0x01, 0x12, 0x03, 0x1a, 0x01, 0x02}, uint8(0), uint64(7))
	f.Fuzz(func(t *testing.T, wire []byte, kind uint8, split uint64) {
		s := fuzzStreams[int(kind)%len(fuzzStreams)]
		ref := s.new()
		refErr := proto.Unmarshal(wire, ref)

		pool := &countingPool{}
		bufs := splitPieces(rand.New(rand.NewPCG(split, split>>32)), wire, pool)
		in := InFrame{Msg: s.new(), Field: s.field}
		err := NewCodec().Unmarshal(bufs, &in)
		bufs.Free() // as gRPC does once Unmarshal returns
		if (err != nil) != (refErr != nil) {
			t.Fatalf("InFrame error %v, protobuf error %v", err, refErr)
		}
		if err == nil {
			got, ok := in.Frame()
			want := ref.GetData()
			if ok != (want != nil) {
				t.Fatalf("Frame() ok %v, protobuf decoded data %v", ok, want)
			}
			if ok && (got.Index != want.GetIndex() || got.Offset != want.GetOffset() || !bytes.Equal(slices.Concat(got.Data...), want.GetData())) {
				t.Fatalf("frame %d@%d of %d bytes, protobuf %d@%d of %d", got.Index, got.Offset, got.Len(),
					want.GetIndex(), want.GetOffset(), len(want.GetData()))
			}
			s.clear(in.Msg)
			s.clear(ref)
			if !proto.Equal(in.Msg, ref) {
				t.Fatalf("other fields %v, protobuf %v", in.Msg, ref)
			}
		}
		in.Release()
		pooled := int64(0) // mem.NewBuffer does not pool small buffers
		for _, b := range bufs {
			if _, small := b.(mem.SliceBuffer); !small {
				pooled++
			}
		}
		if got := pool.put.Load(); got != pooled {
			t.Fatalf("%d of %d pooled buffers back in the pool after Release", got, pooled)
		}
	})
}

// FuzzOutFrameRoundTrip encodes a frame with OutFrame (copied and
// borrowed), decodes it with InFrame from pieces cut anywhere, and checks it
// comes back unchanged and that protobuf reads the same bytes.
func FuzzOutFrameRoundTrip(f *testing.F) {
	f.Add(uint8(0), uint32(0), uint64(0), []byte{1}, uint64(1), false)
	f.Add(uint8(2), uint32(7), uint64(1<<40), pattern(2, 5000), uint64(2), true)
	f.Add(uint8(3), ^uint32(0), ^uint64(0), pattern(3, 70_000), uint64(3), true)
	f.Add(uint8(1), uint32(1), uint64(9), []byte{}, uint64(4), false)
	f.Fuzz(func(t *testing.T, kind uint8, index uint32, offset uint64, data []byte, split uint64, borrow bool) {
		s := fuzzStreams[int(kind)%len(fuzzStreams)]
		rng := rand.New(rand.NewPCG(split, split>>32))
		var pieces [][]byte // data cut into the caller's pieces
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(3000))
			pieces, rest = append(pieces, rest[:n:n]), rest[n:]
		}
		var lender Lender
		out, err := NewCodec().Marshal(&OutFrame{Field: s.field, Index: index, Offset: offset, Data: pieces, Borrow: borrow, Lender: &lender})
		if err != nil {
			t.Fatal(err)
		}
		wire := out.Materialize()
		out.Free()
		if lender.Outstanding() != 0 {
			t.Fatalf("%d pieces still lent after the message was freed", lender.Outstanding())
		}
		ref := s.new()
		if err := proto.Unmarshal(wire, ref); err != nil {
			t.Fatalf("protobuf cannot read the encoded frame: %v", err)
		}
		if len(data) > 0 {
			if d := ref.GetData(); d == nil || d.GetIndex() != index || d.GetOffset() != offset || !bytes.Equal(d.GetData(), data) {
				t.Fatalf("protobuf read %v, want %d@%d of %d bytes", d, index, offset, len(data))
			}
		}
		in := InFrame{Msg: s.new(), Field: s.field}
		bufs := splitPieces(rng, wire, &countingPool{})
		if err := NewCodec().Unmarshal(bufs, &in); err != nil {
			t.Fatalf("InFrame cannot read the encoded frame: %v", err)
		}
		bufs.Free()
		defer in.Release()
		got, ok := in.Frame()
		if !ok || got.Index != index || got.Offset != offset || !bytes.Equal(slices.Concat(got.Data...), data) {
			t.Fatalf("decoded ok=%v %d@%d of %d bytes, want %d@%d of %d", ok, got.Index, got.Offset, got.Len(), index, offset, len(data))
		}
	})
}

// FuzzAssemblerAddFrame drives an Assembler with a batch and a frame
// sequence decoded from the input, and checks every answer against a naive
// model of the framing rules: which frames are errors (wrapping
// ErrBadFrame), which are discarded, which bytes reach each sink and in what
// order, and what Complete, Missing and Finish report. One needed chunk's
// sink fails at a chosen write.
//
// Input layout: byte 0 is the chunk count (1-8), then per chunk a size
// (uvarint, capped at 4 KiB unless it is huge on purpose) and a byte whose
// bit 0 says needed; then a failing write number; then frames, each an index
// byte, an offset (uvarint), a length byte (times 4113 when bit 7 of the
// index byte is set, so lengths pass MaxFrameBytes) and a piece count.
func FuzzAssemblerAddFrame(f *testing.F) {
	f.Add([]byte{1, 10, 1, 255, 0, 0, 10, 1})
	f.Add([]byte{2, 10, 1, 20, 1, 0, 0, 0, 5, 2, 0, 5, 5, 1, 1, 0, 20, 3})
	f.Add([]byte{2, 10, 0, 4, 1, 255, 0, 0, 10, 1, 1, 0, 4, 1, 1, 0, 1, 1})
	f.Add([]byte{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 1, 255, 0x80, 0, 255, 1}) // a 2^40-byte chunk, a frame over MaxFrameBytes
	f.Add([]byte{3, 5, 1, 5, 1, 5, 1, 1, 0, 0, 5, 1, 1, 0, 5, 1, 2, 3, 2, 1})     // a sink failure, a gap
	f.Add([]byte{1, 5, 1, 255, 9, 0, 1, 1, 0, 0, 0, 1})                           // index out of range, empty frame
	f.Fuzz(func(t *testing.T, in []byte) {
		r := fuzzInput{b: in}
		n := 1 + int(r.byte())%8
		chunks := make([]*kvringv1.ChunkRef, n)
		need := map[uint32]bool{}
		for i := range chunks {
			size := r.uvarint()
			if size > 4096 && size < 1<<40 {
				size %= 4097
			}
			chunks[i] = &kvringv1.ChunkRef{Id: make([]byte, 32), Size: size}
			if r.byte()&1 == 1 {
				need[uint32(i)] = true
			}
		}
		failAt := int(r.byte())
		a := NewAssembler(chunks, need)

		// The model: per chunk what was received and whether its sink failed.
		type model struct {
			received uint64
			failed   bool
			got      bytes.Buffer
		}
		m := make([]model, n)
		sinks := make([]Sink, n)
		var failing *failSink
		for i := range n {
			if !need[uint32(i)] {
				if err := a.SetSink(uint32(i), &bufSink{}); err == nil {
					t.Fatalf("SetSink accepted chunk %d, which is not needed", i)
				}
				continue
			}
			s := &recordSink{}
			if failing == nil && failAt < 255 {
				failing = &failSink{failAt: failAt}
				s.fail = failing
			}
			sinks[i] = s
			if err := a.SetSink(uint32(i), s); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.SetSink(uint32(n), &bufSink{}); err == nil {
			t.Fatal("SetSink accepted an index out of range")
		}
		for step := 0; !r.done() && step < 64; step++ {
			ib := r.byte()
			idx, off := uint32(ib&0x7f), r.uvarint()
			ln := int(r.byte())
			if ib&0x80 != 0 {
				ln *= 4113
			}
			np := 1 + int(r.byte())%4
			data := make([]byte, ln) // large frames are zeros
			if ln <= 4096 {          // small frames carry a pattern, so misplaced bytes show
				data = pattern(int(idx)<<20^int(off), ln)
			}
			var pieces [][]byte
			for p := range np {
				lo, hi := ln*p/np, ln*(p+1)/np
				pieces = append(pieces, data[lo:hi])
			}
			sink, err := a.AddFrame(Frame{Index: idx, Offset: off, Data: pieces})

			// What the model expects.
			switch {
			case int(idx) >= n:
				if !errors.Is(err, ErrBadFrame) {
					t.Fatalf("frame for index %d of %d chunks: %v, want ErrBadFrame", idx, n, err)
				}
				continue
			case !need[idx] || m[idx].failed:
				if sink != nil || err != nil {
					t.Fatalf("frame for chunk %d (needed %v, failed %v): %v, %v, want it discarded", idx, need[idx], m[idx].failed, sink, err)
				}
				continue
			}
			c := &m[idx]
			bad := ln == 0 || ln > MaxFrameBytes || off != c.received || uint64(ln) > chunks[idx].Size-c.received
			if bad {
				if !errors.Is(err, ErrBadFrame) {
					t.Fatalf("bad frame %d@%d of %d bytes (received %d of %d): %v, want ErrBadFrame", idx, off, ln, c.received, chunks[idx].Size, err)
				}
				continue
			}
			if sink != sinks[idx] {
				t.Fatalf("frame %d@%d: sink %v, want the chunk's", idx, off, sink)
			}
			if rs := sinks[idx].(*recordSink); rs.fail != nil && rs.failedNow {
				if err == nil || errors.Is(err, ErrBadFrame) || !errors.Is(err, errSink) || a.Err(idx) == nil {
					t.Fatalf("frame %d@%d: the sink failed but AddFrame returned %v (Err %v)", idx, off, err, a.Err(idx))
				}
				c.failed = true
				continue
			}
			if err != nil {
				t.Fatalf("good frame %d@%d of %d bytes: %v", idx, off, ln, err)
			}
			c.received += uint64(ln)
			c.got.Write(data) // the model's copy, compared with the sink's at the end
		}

		var missing []uint32
		for i := range n {
			idx := uint32(i)
			c := &m[i]
			complete := need[idx] && !c.failed && c.received == chunks[i].Size
			if a.Complete(idx) != complete {
				t.Fatalf("Complete(%d) = %v, want %v", i, a.Complete(idx), complete)
			}
			if (a.Err(idx) != nil) != c.failed {
				t.Fatalf("Err(%d) = %v, failed %v", i, a.Err(idx), c.failed)
			}
			if need[idx] && !c.failed && c.received < chunks[i].Size {
				missing = append(missing, idx)
			}
			if rs, ok := sinks[i].(*recordSink); ok && !c.failed && !bytes.Equal(rs.written.Bytes(), c.got.Bytes()) {
				t.Fatalf("chunk %d: the sink got %d bytes, the model %d, or they differ", i, rs.written.Len(), c.got.Len())
			}
		}
		if got := a.Missing(); !slices.Equal(got, missing) {
			t.Fatalf("Missing() = %v, want %v", got, missing)
		}
		if err := a.Finish(); (err == nil) != (len(missing) == 0) || err != nil && !errors.Is(err, ErrIncompleteStream) {
			t.Fatalf("Finish() = %v with %d chunks missing", err, len(missing))
		}
		if a.Complete(uint32(n)) || a.Err(uint32(n)) != nil {
			t.Fatal("an index out of range reports complete or failed")
		}
	})
}

// recordSink keeps what it is written, as a BuffersSink, and fails through
// fail when set; failedNow says whether its last call failed.
type recordSink struct {
	written   bytes.Buffer
	fail      *failSink
	failedNow bool
}

func (s *recordSink) Write(p []byte) (int, error) {
	s.failedNow = false
	if s.fail != nil {
		n, err := s.fail.Write(p)
		if err != nil || n != len(p) {
			s.failedNow = true
			return n, err
		}
	}
	return s.written.Write(p)
}

func (s *recordSink) WriteBuffers(bufs [][]byte) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := s.Write(b)
		total += n
		if err != nil || s.failedNow {
			return total, err
		}
	}
	return total, nil
}

// fuzzInput reads a fuzz input; past its end it reads zeros.
type fuzzInput struct{ b []byte }

func (r *fuzzInput) done() bool { return len(r.b) == 0 }

func (r *fuzzInput) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *fuzzInput) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.b = r.b[min(len(r.b), 1):]
		return 0
	}
	r.b = r.b[n:]
	return v
}
