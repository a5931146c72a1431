package crc32c

import "golang.org/x/sys/cpu"

// copyCRCHasFold reports whether this CPU runs copyCRCFold: AVX2 (with OS
// support for YMM state), VEX-encoded 256-bit VPCLMULQDQ (CPUID leaf 7, ECX
// bit 10; x/sys/cpu reports it only together with AVX-512) and SSE4.2.
var copyCRCHasFold = cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE42 && copyCRCHasVPCLMULQDQ()

func copyCRCHasVPCLMULQDQ() bool {
	if maxLeaf, _, _, _ := copyCRCCPUID(0, 0); maxLeaf < 7 {
		return false
	}
	_, _, ecx, _ := copyCRCCPUID(7, 0)
	return ecx&(1<<10) != 0
}

// copyCRCFold copies n bytes from src to dst and returns the CRC-32C
// register crc (not inverted) updated with them. n must be a positive
// multiple of 128; with nt, stores are non-temporal and dst must be 32-byte
// aligned. Implemented in copycrc_amd64.s.
//
//go:noescape
func copyCRCFold(dst, src *byte, n int, crc uint32, nt bool) uint32

// crcFold returns the CRC-32C register crc (not inverted) updated with n
// bytes of src, n a positive multiple of 128. Implemented in
// copycrc_amd64.s.
//
//go:noescape
func crcFold(src *byte, n int, crc uint32) uint32

// copyCRCCPUID executes CPUID. Implemented in copycrc_amd64.s.
func copyCRCCPUID(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
