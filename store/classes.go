package store

import "math/bits"

// slotAlign is the smallest allocation granule: slots start on cache lines.
const slotAlign = 64

// classSteps is the number of size classes per power of two. With 32 steps a
// slot is never more than 1/32 (3.1 %) larger than the chunk in it, and sizes
// that are multiples of the step (powers of two, 2 MiB, 1.5 MiB...) fit
// exactly.
const classSteps = 32

// classSize returns the slot size for a chunk of n bytes (n > 0).
func classSize(n int64) int64 {
	if n <= slotAlign*classSteps {
		return roundUp(n, slotAlign)
	}
	// p is the largest power of two strictly below n, so n is in (p, 2p].
	p := int64(1) << (bits.Len64(uint64(n-1)) - 1)
	return roundUp(n, p/classSteps)
}

func roundUp(n, step int64) int64 { return (n + step - 1) / step * step }
