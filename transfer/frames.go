package transfer

import (
	"fmt"
	"hash/crc32"

	"github.com/kvring/kvring/store"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// MaxFrameBytes is the most bytes one DataFrame carries (1 MiB), the wire
// contract's bound. Receivers reject larger frames.
const MaxFrameBytes = 1 << 20

// castagnoli is the CRC-32C table, the checksum store.Checksum computes.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SplitFrames cuts data, the bytes of chunk index, into frames of at most
// maxBytes bytes and calls emit with each, in offset order. maxBytes <= 0
// means MaxFrameBytes; a larger maxBytes than MaxFrameBytes is ErrInvalidArgument.
// Empty data emits nothing.
//
// Zero-copy: each frame's Data is a sub-slice of data. The caller must not
// modify data until emit has returned for the frame, and emit must not
// return before the frame is sent (gRPC's Send marshals the message before
// returning) unless the caller keeps data unchanged for longer. A fresh
// DataFrame is passed each time, so emit may keep it. The first error from
// emit stops the split and is returned as it is.
//
// Safe for concurrent use; blocks only in emit.
func SplitFrames(index uint32, data []byte, maxBytes int, emit func(*kvringv1.DataFrame) error) error {
	step, err := frameSize(maxBytes)
	if err != nil {
		return err
	}
	for off := 0; off < len(data); off += step {
		end := min(off+step, len(data))
		f := &kvringv1.DataFrame{Index: index, Offset: uint64(off), Data: data[off:end:end]}
		if err := emit(f); err != nil {
			return err
		}
	}
	return nil
}

// frameSize resolves the maxBytes argument of SplitFrames and SendChunk.
func frameSize(maxBytes int) (int, error) {
	switch {
	case maxBytes <= 0:
		return MaxFrameBytes, nil
	case maxBytes > MaxFrameBytes:
		return 0, fmt.Errorf("%w: frame size %d is larger than the maximum %d", ErrInvalidArgument, maxBytes, MaxFrameBytes)
	}
	return maxBytes, nil
}

// Source is a sealed chunk to send: its bytes and the checksum they must
// have. A *store.View (from store.Acquire) satisfies it. The bytes are only
// read.
type Source interface {
	Bytes() []byte
	Checksum() uint32
}

var _ Source = (*store.View)(nil)

// SendChunk streams src as the frames of chunk index, like SplitFrames, and
// computes the CRC-32C of the bytes in the same pass. It returns the sum of
// the bytes read.
//
// The sum is checked before the last frame is emitted. When it differs from
// src.Checksum(), the last frame is withheld and the error wraps
// store.ErrChecksum; sum is then the whole chunk's actual checksum, for
// View.Corrupt(sum), which counts and drops the chunk. The frames already
// emitted belong to a bad chunk that the receiver will never see complete:
// the caller must abort the stream (until the protocol has a trailing
// signal that marks the chunk bad), so the receiver counts it as a miss.
//
// An error from emit is returned as it is, with the sum of the bytes read so
// far. The zero-copy rules of SplitFrames apply: src must stay valid (not
// Released) until the last emit has returned.
//
// Safe for concurrent use; blocks only in emit.
func SendChunk(index uint32, src Source, maxBytes int, emit func(*kvringv1.DataFrame) error) (sum uint32, err error) {
	step, err := frameSize(maxBytes)
	if err != nil {
		return 0, err
	}
	data, want := src.Bytes(), src.Checksum()
	if len(data) == 0 {
		if want != 0 { // the CRC-32C of no bytes is 0
			return 0, fmt.Errorf("chunk %d: %w: 0 bytes, expected checksum %08x", index, store.ErrChecksum, want)
		}
		return 0, nil
	}
	for off := 0; off < len(data); off += step {
		end := min(off+step, len(data))
		p := data[off:end:end]
		sum = crc32.Update(sum, castagnoli, p)
		if end == len(data) && sum != want {
			return sum, fmt.Errorf("chunk %d: %w: bytes have %08x, expected %08x", index, store.ErrChecksum, sum, want)
		}
		if err := emit(&kvringv1.DataFrame{Index: index, Offset: uint64(off), Data: p}); err != nil {
			return sum, err
		}
	}
	return sum, nil
}
