package testutil

import "encoding/binary"

// SumWords reads every byte of p (a multiple of 32 bytes long) as 64-bit
// words, four at a time: what a benchmark's engine does to use a chunk it
// was lent in place, at the speed of the memory.
func SumWords(p []byte) uint64 {
	var a, c, d, e uint64
	for len(p) >= 32 {
		a += binary.LittleEndian.Uint64(p)
		c += binary.LittleEndian.Uint64(p[8:])
		d += binary.LittleEndian.Uint64(p[16:])
		e += binary.LittleEndian.Uint64(p[24:])
		p = p[32:]
	}
	return a + c + d + e
}
