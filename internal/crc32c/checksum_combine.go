package crc32c

// CRC-32C of a concatenation from the CRCs of its parts.
//
// With bits reflected as hash/crc32 keeps them (bit 31 of a register is
// x^0, bit 0 is x^31), a finished CRC-32C of a message M is
// crc(M) = I*x^(8|M|) + M*x^32 + X (mod P), with the initial value I and the
// final xor X both 0xFFFFFFFF. For two messages A and B:
//
//	crc(A)*x^(8|B|) + crc(B) = I*x^(8|A|+8|B|) + A*x^(32+8|B|) + X*x^(8|B|)
//	                          + I*x^(8|B|) + B*x^32 + X
//	                        = crc(A||B)            (the middle terms cancel: I = X)
//
// so crc(A||B) = crc(A) * (x^(8|B|) mod P) xor crc(B), as zlib's
// crc32_combine does. x^(8n) mod P is built from x^(2^k) mod P by square
// and multiply over the bits of n: about 64 multiplications of 32 steps for
// any length, well under a microsecond.

// castagnoliReflected is the CRC-32C polynomial with its bits reflected.
const castagnoliReflected = 0x82F63B78

// mulModP returns a*b mod P, a and b polynomials of degree below 32 in the
// reflected order (bit 31 is x^0).
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		// b *= x
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8nModP returns x^(8n) mod P, the shift by n bytes. n must not be
// negative.
func xPow8nModP(n int64) uint32 {
	p := uint32(1) << 31  // x^0
	sq := uint32(1) << 23 // x^8: the shift by one byte, squared below for each bit of n
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			p = mulModP(p, sq)
		}
		sq = mulModP(sq, sq)
	}
	return p
}

// CombineChecksum returns Checksum(A||B) from crcA = Checksum(A), crcB =
// Checksum(B) and lenB = len(B) (not negative). It neither blocks nor
// allocates, and is safe for concurrent use.
func CombineChecksum(crcA, crcB uint32, lenB int64) uint32 {
	if lenB == 0 {
		return crcA
	}
	return mulModP(xPow8nModP(lenB), crcA) ^ crcB
}
