package crc32c

import "unsafe"

// Fused copy and CRC-32C.
//
// A staged write copies each frame into shared memory and checksums it. Done
// as two passes (copy, then crc32.Update) the two costs add up. Fused, the
// bytes are loaded once and the checksum arithmetic runs while the stores
// drain to memory: on the reference host (AMD EPYC, Zen 3) a 2-8 MiB write
// reaches about 0.8x the bandwidth of a plain copy, against about 0.45x for
// two passes (BenchmarkCopyCRC32C).
//
// On amd64 with AVX2 and VPCLMULQDQ, copyCRCFold (copycrc_amd64.s) loads 128
// bytes per iteration into four YMM registers, stores them to dst, and folds
// them into four 256-bit accumulators with carry-less multiplication, the
// method of Intel's white paper "Fast CRC Computation for Generic Polynomials
// Using PCLMULQDQ Instruction" (Gopal et al., 2009). At the end the
// accumulators are folded into one 128-bit remainder R congruent to the
// message modulo the polynomial P, and CRC(0, R) = R*x^32 mod P is two CRC32Q
// instructions, in place of the paper's Barrett reduction (as in Peter
// Cawley's fast-crc32). On Zen 3 this checksums about 8 bytes a cycle, like
// the three CRC32Q streams of hash/crc32; a CRC32Q + VPCLMULQDQ hybrid was
// measured too and gained ~10% in cache (the two instructions contend) while
// losing ~40% with non-temporal stores (four write streams), so it is not
// used.
//
// The algebra, with bits reflected as in CRC-32C (the first byte's lowest bit
// is the highest power): a 16-byte lane whose first 8 bytes are the
// polynomial L and last 8 are H is L*x^64 + H. Moving it D bits further into
// the message multiplies it by x^D. PCLMULQDQ of two reflected 64-bit values
// yields their product times x, so with a 32-bit constant k placed in the low
// half of a 64-bit operand (that is, k*x^32) it gives L*k*x^33. Hence
// x^(D+31) mod P multiplies L and x^(D-33) mod P multiplies H; the constants
// in copycrc_amd64.s are these for D = 128, 256, 512, 768 and 1024 bits
// (TestCopyCRCFoldConstants derives them). An initial CRC c is folded in by
// xoring it into the first four bytes: CRC(c, M) = CRC(0, M xor c).
//
// Non-temporal stores (VMOVNTDQ) bypass the cache: into cold memory they
// avoid the read-for-ownership and nearly double the write bandwidth, but a
// destination read back soon after then comes from memory. Go's memmove
// switches to them at 1 MiB. A staged write is not read back (Seal compares
// the running CRC) and a 256 KiB slot is a quarter of this core's L2, so
// CopyNonTemporalMin is 256 KiB: there a fused write measured 10-13 GB/s
// with non-temporal stores against 7-8 GB/s with ordinary ones.
//
// Where the CPU has AVX-512 with VPCLMULQDQ on ZMM registers, copies of
// fold512Min bytes or more run copyCRCFold512 (crcfold512_amd64.s): the
// same method with 512-bit registers, 256 bytes a step, dst aligned to 64
// bytes. On the reference host (AMD Turin) it ran at 2.0-2.9x the 256-bit
// kernel on 256 KiB with non-temporal stores (BenchmarkCopyCRCFold512):
// the staged write of every chunk a node receives from a peer or an
// engine.
//
// Off amd64, and on CPUs without 256-bit VPCLMULQDQ (Intel before Ice Lake,
// AMD before Zen 3), copyCRC32C falls back to two passes. The kernel's loads
// and stores are invisible to the race detector; dst is normally shared
// memory mapped outside the Go heap, which it does not track either.

const (
	// copyCRCFoldMin is the smallest src copyCRC32C hands to the fused
	// kernel: it leaves at least 128 bytes after aligning dst. From 200
	// bytes up the kernel already beats two passes in cache.
	copyCRCFoldMin = 256

	// CopyNonTemporalMin is the smallest src copied with non-temporal
	// stores. See above.
	CopyNonTemporalMin = 256 << 10
)

// copyCRC32C copies src into dst[:len(src)] and returns
// UpdateChecksum(crc, src): crc and the result are finished CRC-32C values,
// as with hash/crc32. dst must be at least as long as src and must not
// overlap it. Bytes of dst past len(src) are not touched. It neither blocks
// nor keeps dst or src, and is safe for concurrent use on distinct dst.
func copyCRC32C(dst, src []byte, crc uint32) uint32 {
	return CopyChecksumStores(dst, src, crc, len(src) >= CopyNonTemporalMin)
}

// CopyChecksumStores is copyCRC32C with the choice of non-temporal stores made
// by the caller: a write that arrives in pieces smaller than
// CopyNonTemporalMin (gRPC's 16 KiB receive buffers) still fills a cold
// slot that is not read back. It neither blocks nor keeps dst or src, and is
// safe for concurrent use on distinct dst.
func CopyChecksumStores(dst, src []byte, crc uint32, nt bool) uint32 {
	if len(dst) < len(src) {
		panic("BUG: copyCRC32C: dst shorter than src")
	}
	if !copyCRCHasFold || len(src) < copyCRCFoldMin {
		return copyCRC32CGeneric(dst, src, crc)
	}
	dst = dst[:len(src)]
	if crcHasFold512 && len(src) >= fold512Min {
		return copyChecksum512(dst, src, crc, nt)
	}
	// Align dst to 32 bytes: VMOVNTDQ needs it, and aligned stores never
	// split a cache line. src stays as it comes; split loads are cheap.
	head := int(-uintptr(unsafe.Pointer(unsafe.SliceData(dst))) & 31)
	crc = copyCRC32CGeneric(dst[:head], src[:head], crc)
	body := (len(src) - head) &^ 127
	crc = ^copyCRCFold(&dst[head], &src[head], body, ^crc, nt)
	return copyCRC32CGeneric(dst[head+body:], src[head+body:], crc)
}

// copyChecksum512 is CopyChecksumStores with the 512-bit kernel: dst
// aligned to 64 bytes (a ZMM's VMOVNTDQ needs it), 256 bytes a step, the
// head and the tail in two passes. len(src) >= fold512Min; dst as long.
func copyChecksum512(dst, src []byte, crc uint32, nt bool) uint32 {
	head := int(-uintptr(unsafe.Pointer(unsafe.SliceData(dst))) & 63)
	crc = copyCRC32CGeneric(dst[:head], src[:head], crc)
	body := (len(src) - head) &^ 255
	crc = ^copyCRCFold512(&dst[head], &src[head], body, ^crc, nt)
	return copyCRC32CGeneric(dst[head+body:], src[head+body:], crc)
}

// copyCRC32CGeneric is copyCRC32C in two passes: copy, then UpdateChecksum.
func copyCRC32CGeneric(dst, src []byte, crc uint32) uint32 {
	copy(dst, src)
	return foldChecksum(crc, src)
}
