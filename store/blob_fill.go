package store

import (
	"errors"
	"fmt"
	"io"

	"github.com/kvring/kvring/internal/crc32c"
)

// fillPiece is the most Fill reads per call: a piece small enough to stay
// in the caches until it is checksummed, large enough that the reads
// cost little.
const fillPiece = 256 << 10

// Fill reads the blob's whole length from r straight into its bytes, a
// piece of at most 256 KiB per Read, and checksums each piece as soon as
// it is read, while the piece is still in the caches: the checksum that
// Sum then reports (and that StageChunk uses) costs a pass over cached
// bytes instead of a later pass over memory. Each Read writes into the
// mapping, and each checksum reads it, under a fault guard: a segment
// truncated meanwhile is an error wrapping ErrFault, not a crash. A short
// source is io.ErrUnexpectedEOF; any error leaves the blob without a sum.
// Blocks in r's Reads. Not safe for concurrent use with other writes of
// the blob's bytes (a blob a local process writes through its own mapping
// is checksummed with Checksum instead).
func (b *Blob) Fill(r io.Reader) error {
	buf := b.Bytes()
	var sum uint32
	idle := 0 // reads in a row that returned nothing
	for n := 0; n < len(buf); {
		piece := buf[n:min(len(buf), n+fillPiece)]
		var k int
		var rerr error
		if err := guardFault(func() { k, rerr = r.Read(piece) }); err != nil {
			return fmt.Errorf("cannot fill blob: %w", err)
		}
		if err := guardFault(func() { sum = crc32c.UpdateChecksum(sum, piece[:k]) }); err != nil {
			return fmt.Errorf("cannot fill blob: %w", err)
		}
		n += k
		idle++
		if k > 0 {
			idle = 0
		}
		switch {
		case rerr == nil && idle >= 100:
			return fmt.Errorf("cannot fill blob: %w", io.ErrNoProgress)
		case rerr == nil:
		case errors.Is(rerr, io.EOF) && n < len(buf):
			return fmt.Errorf("cannot fill blob: %w after %d of %d bytes", io.ErrUnexpectedEOF, n, len(buf))
		case errors.Is(rerr, io.EOF):
		default:
			return fmt.Errorf("cannot fill blob: %w", rerr)
		}
	}
	b.s.mu.Lock()
	b.sum, b.summed = sum, true
	b.s.mu.Unlock()
	return nil
}
