package transfer

import (
	"fmt"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// MaxFrameBytes is the most bytes one DataFrame carries (1 MiB), the wire
// contract's bound. Receivers reject larger frames.
const MaxFrameBytes = 1 << 20

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

// frameSize resolves the maxBytes argument of SplitFrames.
func frameSize(maxBytes int) (int, error) {
	switch {
	case maxBytes <= 0:
		return MaxFrameBytes, nil
	case maxBytes > MaxFrameBytes:
		return 0, fmt.Errorf("%w: frame size %d is larger than the maximum %d", ErrInvalidArgument, maxBytes, MaxFrameBytes)
	}
	return maxBytes, nil
}
