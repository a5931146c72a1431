package store

import (
	"sync"

	"github.com/kvring/kvring/internal/crc32c"
)

// parallelChecksumPart is the smallest part a checksum is split into: below
// it the goroutine hand-off costs more than the second core gains.
const parallelChecksumPart = 256 << 10

// guardedChecksumParts is guardedChecksum of b split into up to parts
// pieces of at least parallelChecksumPart bytes, each checksummed under its
// own fault guard, the first on the calling goroutine and the others on
// goroutines of their own, and combined (crc32c.CombineChecksum). One pass over
// the bytes in all; it returns when every part is done. A fault in any
// part is the error (wrapping ErrFault). parts <= 1, or a b too short to
// split, is one pass on the caller. It keeps no reference to b.
func guardedChecksumParts(b []byte, parts int) (uint32, error) {
	parts = min(parts, len(b)/parallelChecksumPart)
	if parts <= 1 {
		return guardedChecksum(b)
	}
	// Parts of equal length, rounded to 64 bytes (cache lines); the last
	// takes the rest.
	step := len(b) / parts &^ 63
	type part struct {
		sum uint32
		err error
	}
	res := make([]part, parts)
	var wg sync.WaitGroup
	for i := 1; i < parts; i++ {
		lo, hi := i*step, (i+1)*step
		if i == parts-1 {
			hi = len(b)
		}
		wg.Go(func() { res[i].sum, res[i].err = guardedChecksum(b[lo:hi]) })
	}
	res[0].sum, res[0].err = guardedChecksum(b[:step])
	wg.Wait()
	sum := res[0].sum
	for i := 1; i < parts; i++ {
		if res[i].err != nil {
			return 0, res[i].err
		}
		n := step
		if i == parts-1 {
			n = len(b) - i*step
		}
		sum = crc32c.CombineChecksum(sum, res[i].sum, int64(n))
	}
	if res[0].err != nil {
		return 0, res[0].err
	}
	return sum, nil
}
