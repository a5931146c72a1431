//go:build !amd64

package crc32c

// copyCRCHasFold is false: the fused kernel exists only on amd64, and
// copyCRC32C copies then checksums.
const copyCRCHasFold = false

func copyCRCFold(dst, src *byte, n int, crc uint32, nt bool) uint32 {
	panic("BUG: copyCRCFold called without a fused kernel")
}

func crcFold(src *byte, n int, crc uint32) uint32 {
	panic("BUG: crcFold called without a fold kernel")
}

// crcHasFold512 is false: the 512-bit kernel exists only on amd64.
const crcHasFold512 = false

func crcFold512(src *byte, n int, crc uint32) uint32 {
	panic("BUG: crcFold512 called without a 512-bit fold kernel")
}

func copyCRCFold512(dst, src *byte, n int, crc uint32, nt bool) uint32 {
	panic("BUG: copyCRCFold512 called without a 512-bit fold kernel")
}
