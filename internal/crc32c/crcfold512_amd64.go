package crc32c

import "golang.org/x/sys/cpu"

// crcHasFold512 reports whether this CPU runs crcFold512: AVX-512F with OS
// support for ZMM state, VPCLMULQDQ on ZMM and SSE4.2 (AMD Zen 4 and later,
// Intel Ice Lake and later).
var crcHasFold512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasSSE42

// crcFold512 returns the CRC-32C register crc (not inverted) updated with n
// bytes of src, n a positive multiple of 256: crcFold with 512-bit
// registers. Implemented in crcfold512_amd64.s.
//
//go:noescape
func crcFold512(src *byte, n int, crc uint32) uint32

// copyCRCFold512 copies n bytes from src to dst and returns the CRC-32C
// register crc (not inverted) updated with them: copyCRCFold with 512-bit
// registers. n must be a positive multiple of 256; with nt, stores are
// non-temporal and dst must be 64-byte aligned. Implemented in
// crcfold512_amd64.s.
//
//go:noescape
func copyCRCFold512(dst, src *byte, n int, crc uint32, nt bool) uint32
