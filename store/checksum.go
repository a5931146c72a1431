package store

import "github.com/kvring/kvring/internal/crc32c"

// The checksum of chunk bytes is package crc32c's (internal/crc32c), which
// the SDK and transfer use without linking the store; these are its entry
// points for the store's callers.

// Checksum returns the CRC-32C (Castagnoli) of p, the checksum kvring uses
// for chunk bytes everywhere (crc32c.Checksum: the fold kernel where the
// CPU has it). It neither blocks nor keeps p, and is safe for concurrent
// use.
func Checksum(p []byte) uint32 { return crc32c.Checksum(p) }

// UpdateChecksum returns crc, a CRC-32C of earlier bytes (0 to start),
// extended by p: UpdateChecksum(0, p) == Checksum(p), and checksumming a
// chunk piece by piece gives the same value as Checksum of the whole
// (crc32c.UpdateChecksum). It neither blocks nor keeps p, and is safe for
// concurrent use.
func UpdateChecksum(crc uint32, p []byte) uint32 { return crc32c.UpdateChecksum(crc, p) }

// CopyChecksum copies src into dst, which must be at least as long, and
// returns crc (a CRC-32C, 0 to start) extended by src: the copy and the
// checksum in one pass over the bytes, as a staged write does
// (crc32c.CopyChecksum). Safe for concurrent use on distinct dst.
func CopyChecksum(dst, src []byte, crc uint32) uint32 { return crc32c.CopyChecksum(dst, src, crc) }
