package transfer

import (
	"testing"

	"github.com/kvring/kvring/store"
)

// TestChecksumIsStoresChecksum: Checksum agrees with store.Checksum at and
// around the scratch size, the fused kernel's thresholds and frame sizes.
func TestChecksumIsStoresChecksum(t *testing.T) {
	t.Parallel()
	big := make([]byte, 2*MaxFrameBytes+77)
	for i := range big {
		big[i] = byte(i*31 + i>>9)
	}
	for _, n := range []int{0, 1, 255, 256, checksumScratch - 1, checksumScratch, checksumScratch + 1, 3*checksumScratch + 129,
		256 << 10, MaxFrameBytes + 3, len(big)} {
		for _, off := range []int{0, 1, 13} {
			if off+n > len(big) {
				continue
			}
			p := big[off : off+n]
			if got, want := Checksum(p), store.Checksum(p); got != want {
				t.Fatalf("%d bytes at offset %d: %08x, want %08x", n, off, got, want)
			}
		}
	}
}
