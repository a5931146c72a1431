// Package crc32c is kvring's checksum of chunk bytes: CRC-32C (Castagnoli),
// with an amd64 kernel (AVX2 and VPCLMULQDQ) that checksums memory about
// twice as fast as hash/crc32 and copies while it checksums (copycrc.go).
// The store, transfer and the SDK all use it, so it is a leaf: it imports
// nothing of kvring's, and an engine that links the SDK does not link the
// store to checksum its chunks.
//
// Every value is a finished CRC-32C, as hash/crc32 gives: Checksum(p) ==
// crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)). Everything here is
// safe for concurrent use (the copies on distinct destinations), blocks on
// nothing and keeps no reference to its arguments. The kernel's loads and
// stores are invisible to the race detector.
package crc32c
