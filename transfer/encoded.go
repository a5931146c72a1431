package transfer

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// EncodedFrame is a data frame encoded ahead of sending, in a buffer of the
// pool OutFrame copies into, whose data bytes the sender fills itself: a
// node reading a chunk out of shared memory copies and checksums it in one
// pass (crc32c.CopyChecksum) straight into the frame, then sends it with no
// further copy. Give it to a stream's SendMsg through Codec: Marshal hands
// the buffer to gRPC as it is, and gRPC returns it to the pool once it has
// written it (or dropped it with the stream).
//
// The EncodedFrame owns its buffer until Marshal; then gRPC does, and Data
// must no longer be used. A frame that is not sent must be Released. Not
// safe for concurrent use.
type EncodedFrame struct {
	buf  *[]byte // nil once marshalled or released
	data int     // where the data bytes start in *buf
}

// encodedHeaderMax bounds the bytes an encoded data frame's header takes
// (the message tag and length, the frame's index, offset and data length).
const encodedHeaderMax = 64

// FrameLen returns the data length of the next frame of a chunk with rest
// bytes still to send (rest > 0), for EncodeFrame: at most MaxFrameBytes,
// and such that header and data fill a size class of the frame pool, whose
// buffers are powers of two. A sender that holds a whole chunk's frames at
// once (a node reading a chunk out of shared memory checks its checksum
// before it sends the first byte) then holds about the chunk's size in
// buffers: frames of exactly MaxFrameBytes, or one of 256 KiB for a 256 KiB
// chunk, would take buffers of twice their size. Receivers take frames of
// any length that join up.
func FrameLen(rest int) int {
	if rest+encodedHeaderMax <= 4<<10 {
		return rest
	}
	c := 4 << 10
	for c<<1 <= MaxFrameBytes && (c<<1)-encodedHeaderMax <= rest {
		c <<= 1
	}
	return min(rest, c-encodedHeaderMax)
}

// EncodeFrame returns a frame of n data bytes of chunk index at offset, the
// message field field (GetDataField, FetchDataField), whose Data the caller
// fills before sending. n must be 1 to MaxFrameBytes.
func EncodeFrame(field protowire.Number, index uint32, offset uint64, n int) (*EncodedFrame, error) {
	if n < 1 || n > MaxFrameBytes {
		return nil, fmt.Errorf("%w: data frame of %d bytes, want 1 to %d", ErrInvalidArgument, n, MaxFrameBytes)
	}
	var hdrBuf [64]byte
	hdr, err := appendFrameHeader(hdrBuf[:0], field, index, offset, uint64(n))
	if err != nil {
		return nil, err
	}
	buf := frameBuffers.Get(len(hdr) + n) // every byte is written: the header now, the data by the caller
	copy(*buf, hdr)
	return &EncodedFrame{buf: buf, data: len(hdr)}, nil
}

// Data returns the frame's data bytes, for the caller to fill; their content
// is undefined until then. Nil once the frame was sent or released.
func (e *EncodedFrame) Data() []byte {
	if e.buf == nil {
		return nil
	}
	return (*e.buf)[e.data:]
}

// Len is the number of data bytes, 0 once sent or released.
func (e *EncodedFrame) Len() int { return len(e.Data()) }

// Release returns the buffer to the pool unless gRPC took it (Marshal).
// Idempotent.
func (e *EncodedFrame) Release() {
	if e.buf != nil {
		frameBuffers.Put(e.buf)
		e.buf = nil
	}
}

var errFrameGone = errors.New("data frame: encoded frame sent or released already")

// marshal hands the buffer over: gRPC frees it into the pool once written.
func (e *EncodedFrame) marshal() (mem.BufferSlice, error) {
	if e.buf == nil {
		return nil, errFrameGone
	}
	buf := e.buf
	e.buf = nil
	return mem.BufferSlice{mem.NewBuffer(buf, frameBuffers)}, nil
}
