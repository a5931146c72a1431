package ring

import (
	"encoding/binary"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// HasherXXHash64 names xxHash64 (github.com/cespare/xxhash/v2), the default and, for now, only hash function.
const HasherXXHash64 = "xxhash64"

// keyHash hashes a chunk key: xxHash64(len(namespace) as 8 little-endian bytes ‖ namespace ‖ id). The length
// comes first so that no (namespace, id) pair can be read as another: ("ab", "c…") and ("a", "bc…") hash
// different inputs. It does not allocate: typical keys are copied into a stack buffer and hashed in one call
// (twice as fast as streaming); longer ones are streamed, with the same result.
func keyHash(namespace string, id []byte) uint64 {
	var buf [160]byte
	binary.LittleEndian.PutUint64(buf[:8], uint64(len(namespace)))
	if n := 8 + len(namespace) + len(id); n <= len(buf) {
		copy(buf[8+copy(buf[8:], namespace):], id)
		return xxhash.Sum64(buf[:n])
	}
	var d xxhash.Digest
	d.Reset()
	_, _ = d.Write(buf[:8])
	_, _ = d.WriteString(namespace)
	_, _ = d.Write(id)
	return d.Sum64()
}

// partitionsUpTo returns how many of parts partitions sit at or before point v on the circle: partition p sits
// at floor(p·2^64/parts), so it is min(parts, ceil((v+1)·parts/2^64)), computed exactly in 128 bits.
func partitionsUpTo(v uint64, parts int) int {
	hi, lo := bits.Mul64(v, uint64(parts))
	lo, carry := bits.Add64(lo, uint64(parts), 0)
	hi += carry
	if lo != 0 {
		hi++
	}
	return min(int(hi), parts)
}

// Virtual node points. A member's points are the splitmix64 sequence seeded with xxHash64 of its ID: point i
// (1-based) is mix64(seed + i·vnodeStep). One hash per member and a few multiplies per point keep ring builds
// cheap in every language (the Python client computes the same points). Distinct IDs give distinct points
// unless their seeds differ by a multiple of vnodeStep below V (chance about 2V/2^64); New reports that as
// ErrHashCollision.
const vnodeStep = 0x9e3779b97f4a7c15

// memberSeed is the start of a member's point sequence: xxHash64 of its ID for PlacementV2, of
// "kvring-ring-v3/" ‖ ID for PlacementV3 (the rehearsal version: other points, so other owners).
func memberSeed(id string, version int) uint64 {
	if version == PlacementV3 {
		return xxhash.Sum64String("kvring-ring-v3/" + id)
	}
	return xxhash.Sum64String(id)
}

// mix64 is splitmix64's output function, a bijection of uint64.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
