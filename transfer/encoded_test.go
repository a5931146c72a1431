package transfer

import (
	"bytes"
	"errors"
	"testing"
)

// TestEncodedFrameIsTheOutFramesEncoding: an EncodedFrame filled with the
// same bytes puts on the wire what OutFrame does (and so what protobuf
// does), for zero and non-zero index and offset; its buffer is handed over
// once, after which it is gone, and Release is then a no-op.
func TestEncodedFrameIsTheOutFramesEncoding(t *testing.T) {
	t.Parallel()
	c := NewCodec()
	for _, tc := range []struct {
		index  uint32
		offset uint64
		n      int
	}{{0, 0, 1}, {3, 1 << 20, 5000}, {1 << 20, 7, MaxFrameBytes}} {
		data := bytes.Repeat([]byte{byte(tc.n), 1, 2}, tc.n/3+1)[:tc.n]
		want, err := c.Marshal(&OutFrame{Field: GetDataField, Index: tc.index, Offset: tc.offset, Data: [][]byte{data}})
		if err != nil {
			t.Fatal(err)
		}
		f, err := EncodeFrame(GetDataField, tc.index, tc.offset, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		if f.Len() != tc.n {
			t.Fatalf("Len %d, want %d", f.Len(), tc.n)
		}
		copy(f.Data(), data)
		got, err := c.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Materialize(), want.Materialize()) {
			t.Fatalf("index %d offset %d, %d bytes: the encoded frame differs from OutFrame's", tc.index, tc.offset, tc.n)
		}
		got.Free()
		want.Free()
		if f.Data() != nil || f.Len() != 0 {
			t.Fatal("the frame still has data after gRPC took its buffer")
		}
		if _, err := c.Marshal(f); !errors.Is(err, errFrameGone) {
			t.Fatalf("a second Marshal: %v, want errFrameGone", err)
		}
		f.Release() // no-op: gRPC has the buffer
	}
	for _, n := range []int{0, MaxFrameBytes + 1} {
		if _, err := EncodeFrame(GetDataField, 0, 0, n); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("EncodeFrame of %d bytes: %v, want ErrInvalidArgument", n, err)
		}
	}
	f, err := EncodeFrame(GetDataField, 0, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	f.Release()
	f.Release()
	if _, err := c.Marshal(f); !errors.Is(err, errFrameGone) {
		t.Fatalf("Marshal after Release: %v, want errFrameGone", err)
	}
}

// TestFrameLenKeepsAChunksFramesNearItsSize: the frames FrameLen cuts a
// chunk into join up to the whole chunk, none longer than MaxFrameBytes,
// and their pool buffers (EncodeFrame) add up to the chunk's size plus a
// little, not up to twice it as frames of exactly MaxFrameBytes (or one
// 256 KiB frame of a 256 KiB chunk) would: a node holds a chunk's frames at
// once while it checks the chunk's checksum.
func TestFrameLenKeepsAChunksFramesNearItsSize(t *testing.T) {
	for _, size := range []int{1, 100, 4032, 4033, 4096, 32 << 10, 256 << 10, 1 << 20, 1<<20 + 1, 2 << 20, 3<<20 + 12345, 64 << 20} {
		var frames, held int
		for off := 0; off < size; {
			n := FrameLen(size - off)
			if n < 1 || n > MaxFrameBytes {
				t.Fatalf("size %d at %d: frame of %d bytes", size, off, n)
			}
			f, err := EncodeFrame(GetDataField, 3, uint64(off), n)
			if err != nil {
				t.Fatal(err)
			}
			held += cap(*f.buf)
			f.Release()
			off += n
			frames++
		}
		if limit := size + size/64 + 16<<10; held > limit {
			t.Fatalf("size %d: %d frames hold %d bytes of buffers, want at most %d", size, frames, held, limit)
		}
	}
}
