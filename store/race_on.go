//go:build race

package store

// raceDetector: this build has the race detector, which cannot see the
// fold kernel's loads; Checksum reads Go memory with hash/crc32 instead, so
// that a caller writing p during the call is still reported.
const raceDetector = true
