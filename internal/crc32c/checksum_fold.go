package crc32c

// Reading CRC-32C of mapped memory.
//
// hash/crc32 checksums with three serial CRC32Q streams: about 19 GB/s on
// bytes in the caches on the reference host, but only 6-7 GB/s on bytes in
// memory, where a plain read of the same bytes runs at ~21 GB/s: each
// stream waits for its loads in turn. The fold kernel of copycrc_amd64.s
// (four independent carry-less multiplication accumulators, 128 bytes a
// step) keeps more loads in flight, so it reads memory at about twice that
// rate, and it runs at least as fast in the caches. A blob an engine wrote
// with one large copy (Go's copy streams 1 MiB or more past the caches,
// and so does a device's DMA) is in memory when the node checksums it.
//
// Where the CPU has AVX-512 with VPCLMULQDQ on ZMM registers (AMD Zen 4
// and later, Intel Ice Lake and later), crcfold512_amd64.s runs the same
// method with 512-bit registers, 256 bytes a step: on the reference host
// (AMD Turin) 2.4-2.8x the 256-bit kernel on 256 KiB in the caches and
// 1.2-1.3x from memory (BenchmarkCRCFold512), where the Redis port's GET
// verified each 256 KiB value with a quarter of its CPU.
//
// foldChecksum is Checksum: the store's passes over shared memory (store's
// guardedChecksum, under its fault guard) and checksums of Go memory. The
// kernel's loads are invisible to the race detector, as are those of
// hash/crc32's SSE 4.2 assembly on amd64 (a test that writes p while
// crc32.Checksum reads it is not reported either).

// foldChecksumMin is the shortest p foldChecksum hands to the kernel.
const foldChecksumMin = copyCRCFoldMin

// fold512Min is the shortest p foldChecksum hands to the 512-bit kernel
// (crcfold512_amd64.s), where the CPU has it: below it the setup and the
// longer reduction cost what the wider steps save.
const fold512Min = 1024

// foldChecksum returns tableChecksum(crc, p), with the fold kernel where
// the CPU has it (copyCRCHasFold) and p is long enough. It neither blocks
// nor keeps p, and is safe for concurrent use.
func foldChecksum(crc uint32, p []byte) uint32 {
	if crcHasFold512 && len(p) >= fold512Min {
		body := len(p) &^ 255
		crc = ^crcFold512(&p[0], body, ^crc)
		p = p[body:]
	}
	if !copyCRCHasFold || len(p) < foldChecksumMin {
		return tableChecksum(crc, p)
	}
	body := len(p) &^ 127
	crc = ^crcFold(&p[0], body, ^crc)
	return tableChecksum(crc, p[body:])
}
