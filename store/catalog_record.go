package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// The catalog's record formats. Keys and values are big-endian:
//
//	segment: key = segment id (4 bytes); value = slot size (8) + slots (4)
//	chunk:   key = segment id (4) + slot (4);
//	         value = size (4) + CRC-32C (4) + id (IDSize) + namespace (rest)
//
// Decoding checks every field a restart relies on, so a damaged record is
// dropped on its own instead of failing the start or mapping nonsense.

// maxSegmentSlots bounds the slots of one segment (slotsPerSegment never
// makes more).
const maxSegmentSlots = 1 << 20

// maxSlotSize bounds a slot: the class of the largest chunk (below 2 GiB).
const maxSlotSize = 1 << 31

// segmentRecord is a segment as the catalog keeps it.
type segmentRecord struct {
	id       uint32
	slotSize int64
	nslots   int32
}

func segKey(id uint32) (k [8]byte) {
	binary.BigEndian.PutUint32(k[:4], id)
	return k
}

func chunkKeyBytes(seg uint32, slot int32) (k [8]byte) {
	binary.BigEndian.PutUint32(k[:4], seg)
	binary.BigEndian.PutUint32(k[4:], uint32(slot))
	return k
}

// encodeSegmentValue returns the value of a segment record.
func encodeSegmentValue(slotSize int64, nslots int32) []byte {
	v := make([]byte, 12)
	binary.BigEndian.PutUint64(v[:8], uint64(slotSize))
	binary.BigEndian.PutUint32(v[8:], uint32(nslots))
	return v
}

// decodeSegmentRecord parses a segment record. It neither keeps k nor v.
func decodeSegmentRecord(k, v []byte) (segmentRecord, error) {
	if len(k) != 4 || len(v) != 12 {
		return segmentRecord{}, fmt.Errorf("malformed segment record %x: key of %d bytes, value of %d", k, len(k), len(v))
	}
	r := segmentRecord{id: binary.BigEndian.Uint32(k)}
	size, n := binary.BigEndian.Uint64(v[:8]), binary.BigEndian.Uint32(v[8:])
	if size == 0 || size > maxSlotSize || n == 0 || n > maxSegmentSlots {
		return segmentRecord{}, fmt.Errorf("malformed segment record %x: %d slots of %d bytes", k, n, size)
	}
	r.slotSize, r.nslots = int64(size), int32(n)
	return r, nil
}

// encodeChunkValue returns the value of a chunk record: size, crc, id,
// namespace and, for a chunk placed on the ring by a group key (place
// non-nil) or with a name, a zero byte, the key (the id when place is nil)
// and the name. A namespace never contains a zero byte (ValidateNamespace),
// so records written before placement keys existed decode unchanged, with
// no key, and records written before names with no name.
func encodeChunkValue(ns string, size, crc uint32, id ID, place *ID, name *string) []byte {
	if place == nil && name != nil {
		place = &id
	}
	n := 8 + IDSize + len(ns)
	if place != nil {
		n += 1 + IDSize
	}
	if name != nil {
		n += len(*name)
	}
	v := make([]byte, n)
	binary.BigEndian.PutUint32(v[0:], size)
	binary.BigEndian.PutUint32(v[4:], crc)
	copy(v[8:], id[:])
	copy(v[8+IDSize:], ns)
	if place != nil {
		copy(v[8+IDSize+len(ns)+1:], place[:])
	}
	if name != nil {
		copy(v[8+IDSize+len(ns)+1+IDSize:], *name)
	}
	return v
}

// decodeChunkRecord parses a chunk record. It neither keeps k nor v.
func decodeChunkRecord(k, v []byte) (chunkRecord, error) {
	if len(k) != 8 || len(v) < 8+IDSize {
		return chunkRecord{}, fmt.Errorf("malformed chunk record %x: key of %d bytes, value of %d", k, len(k), len(v))
	}
	r := chunkRecord{
		seg:  binary.BigEndian.Uint32(k[:4]),
		slot: int32(binary.BigEndian.Uint32(k[4:])),
		size: binary.BigEndian.Uint32(v[0:]),
		crc:  binary.BigEndian.Uint32(v[4:]),
	}
	copy(r.id[:], v[8:8+IDSize])
	rest := v[8+IDSize:]
	if z := bytes.IndexByte(rest, 0); z >= 0 {
		if len(rest)-z-1 < IDSize {
			return chunkRecord{}, fmt.Errorf("malformed chunk record %x: placement key of %d bytes", k, len(rest)-z-1)
		}
		r.place = new(ID)
		copy(r.place[:], rest[z+1:])
		if len(rest)-z-1 > IDSize {
			name := string(rest[z+1+IDSize:])
			r.name = &name
		}
		rest = rest[:z]
	}
	r.ns = string(rest)
	if r.slot < 0 || r.slot >= maxSegmentSlots || r.size == 0 || int64(r.size) > maxSlotSize {
		return chunkRecord{}, fmt.Errorf("malformed chunk record %x: slot %d, size %d", k, r.slot, r.size)
	}
	if err := ValidateNamespace(r.ns); err != nil {
		return chunkRecord{}, fmt.Errorf("malformed chunk record %x: %w", k, err)
	}
	return r, nil
}
