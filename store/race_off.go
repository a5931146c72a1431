//go:build !race

package store

// raceDetector: this build has no race detector, so Checksum may read Go
// memory with the fold kernel, whose loads the detector could not see.
const raceDetector = false
