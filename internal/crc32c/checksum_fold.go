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
// foldChecksum is Checksum: the store's passes over shared memory (store's
// guardedChecksum, under its fault guard) and checksums of Go memory. The
// kernel's loads are invisible to the race detector, as are those of
// hash/crc32's SSE 4.2 assembly on amd64 (a test that writes p while
// crc32.Checksum reads it is not reported either).

// foldChecksumMin is the shortest p foldChecksum hands to the kernel.
const foldChecksumMin = copyCRCFoldMin

// foldChecksum returns tableChecksum(crc, p), with the fold kernel where
// the CPU has it (copyCRCHasFold) and p is long enough. It neither blocks
// nor keeps p, and is safe for concurrent use.
func foldChecksum(crc uint32, p []byte) uint32 {
	if !copyCRCHasFold || len(p) < foldChecksumMin {
		return tableChecksum(crc, p)
	}
	body := len(p) &^ 127
	crc = ^crcFold(&p[0], body, ^crc)
	return tableChecksum(crc, p[body:])
}
