package crc32c

import "hash/crc32"

// castagnoli is the CRC-32C table, the only one in the package: the checksum
// of every chunk, on the wire and in the store.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of p, the checksum kvring uses
// for chunk bytes everywhere. It runs the fold kernel of checksum_fold.go
// where the CPU has it and p is long enough (about 17 GB/s on bytes in
// memory on the reference host, against 5-6 GB/s for hash/crc32). Like
// hash/crc32's own assembly on amd64, the kernel's loads are invisible to
// the race detector. It neither blocks nor keeps p, and is safe for
// concurrent use.
func Checksum(p []byte) uint32 { return foldChecksum(0, p) }

// UpdateChecksum returns crc, a CRC-32C of earlier bytes (0 to start),
// extended by p: UpdateChecksum(0, p) == Checksum(p), and checksumming a
// chunk piece by piece gives the same value as Checksum of the whole. Other
// packages use it rather than a table of their own. It runs the fold kernel
// as Checksum does (a value read from a socket in 16 KiB pieces and
// checksummed piece by piece costs about half what hash/crc32 costs). It
// neither blocks nor keeps p, and is safe for concurrent use.
func UpdateChecksum(crc uint32, p []byte) uint32 { return foldChecksum(crc, p) }

// tableChecksum is UpdateChecksum with hash/crc32 alone: the short pieces
// the fold kernel does not take, and CPUs without it.
func tableChecksum(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }

// CopyChecksum copies src into dst, which must be at least as long, and
// returns crc (a CRC-32C, 0 to start) extended by src: the copy and the
// checksum in one pass over the bytes, as a staged write does (about twice
// as fast as copy and then Checksum on CPUs with VPCLMULQDQ; see
// copycrc.go). Safe for concurrent use on distinct dst.
func CopyChecksum(dst, src []byte, crc uint32) uint32 { return copyCRC32C(dst, src, crc) }
