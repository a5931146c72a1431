package transfer

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

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
// (or per call); safe for concurrent use. The zero value is ready. A Lender
// starts no goroutine.
type Lender struct {
	mu  sync.Mutex
	out int64
	// idle is closed when out drops to zero; a new one is made when a piece
	// is lent while none is out. nil until the first piece is lent.
	idle chan struct{}
}

// Get is never called for lent pieces; it allocates, as any pool may.
func (l *Lender) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

// Put records that gRPC let go of one lent piece. It does not block.
func (l *Lender) Put(*[]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.out <= 0 {
		panic("BUG: transfer.Lender.Put without a lent piece")
	}
	l.out--
	if l.out == 0 {
		close(l.idle)
	}
}

// Outstanding reports how many lent pieces gRPC still holds. It does not
// block.
func (l *Lender) Outstanding() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out
}

// Wait blocks until gRPC has let go of every piece lent so far, or timeout
// passes, and reports whether it did. gRPC lets go right after writing a
// piece, or when it drops a canceled stream's queued data; a write blocked
// on a peer that stopped reading holds its piece until the connection fails.
// Wait starts no goroutine: nothing of it outlives the call, also when gRPC
// never hands a piece back.
func (l *Lender) Wait(timeout time.Duration) bool {
	l.mu.Lock()
	if l.out == 0 {
		l.mu.Unlock()
		return true
	}
	idle := l.idle
	l.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}

func (l *Lender) lend(p []byte) mem.Buffer {
	l.mu.Lock()
	if l.out == 0 {
		l.idle = make(chan struct{})
	}
	l.out++
	l.mu.Unlock()
	return mem.NewBuffer(&p, l)
}

// borrowedParts backs the encoding of a Borrowed frame of one piece: its
// header (copied, with small pieces) and the piece lent to gRPC.
type borrowedParts struct {
	bufs [2]mem.Buffer
	hdr  [64]byte
}

// marshal encodes the frame: field Field, length-delimited, holding
// DataFrame's fields in field order with zero scalars left out, as protobuf
// encodes them.
func (f *OutFrame) marshal() (mem.BufferSlice, error) {
	n := uint64(0)
	for _, p := range f.Data {
		n += uint64(len(p))
	}
	var hdrBuf [64]byte // tag, length and inner: no allocation
	hdr, err := appendFrameHeader(hdrBuf[:0], f.Field, f.Index, f.Offset, n)
	if err != nil {
		return nil, err
	}
	if f.Borrow {
		if f.Lender == nil {
			return nil, fmt.Errorf("data frame: Borrow without a Lender")
		}
		// Small pieces are copied: gRPC would not track them (mem.NewBuffer
		// does not pool buffers of 1 KiB or less), and copying them is cheap.
		// A frame of one piece (a chunk's bytes) takes one allocation for
		// the slice and the header together.
		var out mem.BufferSlice
		var small []byte
		if len(f.Data) <= 1 {
			parts := new(borrowedParts)
			out, small = parts.bufs[:0], append(parts.hdr[:0], hdr...)
		} else {
			out, small = make(mem.BufferSlice, 0, 1+len(f.Data)), slices.Clone(hdr)
		}
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
	pool := frameBuffers // overwritten whole below: no need for gRPC's clearing
	buf := pool.Get(len(hdr) + int(n))
	b := append((*buf)[:0], hdr...)
	for _, p := range f.Data {
		b = append(b, p...)
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// appendFrameHeader appends to dst (which should have room for 64 bytes) the
// encoding of a data frame up to its first data byte: field Field,
// length-delimited, holding DataFrame{Index, Offset, Data} of n data bytes,
// its fields in field order with zero scalars left out, as protobuf encodes
// them.
func appendFrameHeader(dst []byte, field protowire.Number, index uint32, offset, n uint64) ([]byte, error) {
	if field < 1 || field > protowire.MaxValidNumber {
		return nil, fmt.Errorf("data frame: field number %d out of range", field)
	}
	var innerBuf [32]byte // three varint fields fit: no allocation
	inner := innerBuf[:0]
	if index != 0 {
		inner = protowire.AppendTag(inner, 1, protowire.VarintType)
		inner = protowire.AppendVarint(inner, uint64(index))
	}
	if offset != 0 {
		inner = protowire.AppendTag(inner, 2, protowire.VarintType)
		inner = protowire.AppendVarint(inner, offset)
	}
	if n > 0 { // proto3 leaves out an empty bytes field
		inner = protowire.AppendTag(inner, 3, protowire.BytesType)
		inner = protowire.AppendVarint(inner, n)
	}
	dst = protowire.AppendTag(dst, field, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(len(inner))+n)
	return append(dst, inner...), nil
}
