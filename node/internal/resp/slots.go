package resp

import (
	"crypto/sha1"
	"encoding/hex"
	"sort"
)

// SlotCount is the number of Redis Cluster hash slots.
const SlotCount = 16384

// Slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash tag
// when it has one, else of the whole key, modulo 16384.
func Slot(key []byte) uint16 {
	if tag, ok := HashTag(key); ok {
		key = tag
	}
	return crc16(key) & (SlotCount - 1)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum
// Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// SlotNode is a node as Redis Cluster clients see it.
type SlotNode struct {
	ID   string // kvring's node id
	Host string
	Port int
}

// RedisID is the node's id in Redis Cluster replies: 40 hex digits (the
// SHA-1 of kvring's id), as Redis's own node ids.
func (n SlotNode) RedisID() string {
	sum := sha1.Sum([]byte(n.ID))
	return hex.EncodeToString(sum[:])
}

// SlotRange is a run of slots with the same owners.
type SlotRange struct {
	Start, End uint16 // inclusive
	// Owners are indexes into SlotTable.Nodes: the primary owner (where
	// writes go) first, then the other owners, which serve reads too.
	Owners []int
}

// SlotTable says which nodes own which slots: kvring's placement, seen
// through Redis Cluster's slots. It is immutable once built.
type SlotTable struct {
	Epoch  uint64     // the ring epoch it was built from
	Self   int        // this node's index in Nodes; -1 when it owns nothing
	Nodes  []SlotNode // sorted by ID
	Ranges []SlotRange
	// Unsettled: the ring changed moments ago, so other nodes may still
	// see other owners; keys are served where they arrive, not redirected.
	Unsettled bool
}

// owners returns the owners of slot s (nil when the table has none).
func (t *SlotTable) owners(s uint16) []int {
	i := sort.Search(len(t.Ranges), func(i int) bool { return t.Ranges[i].End >= s })
	if i == len(t.Ranges) || t.Ranges[i].Start > s {
		return nil
	}
	return t.Ranges[i].Owners
}

// byNode returns, per node index, the ranges it is the primary owner of.
func (t *SlotTable) byNode() [][]SlotRange {
	out := make([][]SlotRange, len(t.Nodes))
	for _, r := range t.Ranges {
		if len(r.Owners) > 0 {
			out[r.Owners[0]] = append(out[r.Owners[0]], r)
		}
	}
	return out
}
