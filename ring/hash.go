package ring

import (
	"encoding/binary"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// HasherXXHash64 names xxHash64 (github.com/cespare/xxhash/v2), the default and, for now, only hash function.
const HasherXXHash64 = "xxhash64"

// vnodeSep ends every name the ring library sees. The library names virtual node i of member m by the string
// m+itoa(i), so IDs "n1" and "n11" would share the point "n110" (n1's 10th, n11's 0th). With the separator the
// digits after the last '#' are always the index, so distinct IDs can never produce the same virtual node name.
const vnodeSep = "#"

// libHasher adapts xxHash64 to consistent.Hasher. It has no state.
type libHasher struct{}

func (libHasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

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

// partitionPoint is where partition p sits on the hash circle; it matches the ring library's own computation
// (xxHash64 of p as 8 little-endian bytes), so replica walks start where the library looked for the primary.
func partitionPoint(p int) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(p))
	return xxhash.Sum64(b[:])
}

// vnodePoint is where virtual node i of the member with the given ID sits; it matches the ring library's
// computation for a member whose name is id+vnodeSep.
func vnodePoint(id string, i int) uint64 {
	return xxhash.Sum64String(id + vnodeSep + strconv.Itoa(i))
}
