package disk

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvring/kvring/internal/crc32c"
)

// The on-disk layout of a region file (all integers little endian, every
// offset a multiple of blockSize so that direct I/O can read any part):
//
//	[0, 4096)           region header: regionMagic, version, seq, size, crc
//	[4096, used)        records: record header (recHdrFixed + ns + meta
//	                    bytes) then the chunk's payload. Version 1: each
//	                    record at a block boundary, padded with zeros to
//	                    the next. Version 2: a payload of alignedPayloadMin
//	                    bytes or more starts at the block after its header's
//	                    (the record at a block boundary, both parts
//	                    zero-padded), so that a read lands it straight in a
//	                    caller's block-aligned memory; smaller records are
//	                    packed at posUnit boundaries, and each write batch
//	                    is zero-padded to a block
//	[used, used+F)      footer (written when the region is sealed): footMagic,
//	                    count, body length, body crc, then the body: every
//	                    record header of the region again, back to back
//	[size-4096, size)   trailer: tailMagic, footer offset and length, seq, crc
//
// A region with a valid trailer is indexed from its footer alone (one read);
// one without (the process died while it was the active region) is scanned
// record header by record header until the first that does not decode. The
// payload is verified against its CRC-32C on every read, never at recovery.
const (
	blockSize = 4096

	regionMagic = "KVRREG01"
	footMagic   = "KVRFOOT1"
	tailMagic   = "KVRTAIL1"
	recMagic    = uint32(0x4b565243) // "KVRC"
	version     = uint32(2)          // written; version 1 regions are read too

	// recHdrFixed is the fixed part of a record header: magic u32, header
	// length u16, ns length u8, meta length u16, region seq u64, block u32,
	// payload size u32, payload crc u32, id [32]; the ns and meta bytes and
	// the header's own crc u32 follow.
	recHdrFixed = 4 + 2 + 1 + 2 + 8 + 4 + 4 + 4 + 32
	// maxMeta is the most opaque meta bytes a record carries.
	maxMeta = 2048
	// maxNS is the longest namespace a record carries.
	maxNS = 255
	// footHdr is the fixed part of the footer block.
	footHdr = 8 + 4 + 4 + 4
)

// alignedPayloadMin is the smallest payload that version 2 stores at a
// block boundary of its own (payloadOff): a read of it then needs no copy
// into a shared-memory slot, and the header's block costs at most 6 % of
// the record (4 KiB of 64 KiB; 0.2 % at 2 MiB). Smaller records are packed
// (packed): each starts at the next multiple of posUnit after the one
// before, and only a write batch's end is padded to a block, so that a
// region of 16 KiB chunks is not a fifth padding.
const alignedPayloadMin = 64 << 10

// posUnit is the granularity of record positions in a version 2 region:
// a record header's block field is its offset in these units (in version
// 1, in blocks).
const posUnit = 16

// packed reports whether a record of size payload bytes is packed in a
// region of version ver (else it starts at a block boundary and is padded
// to one).
func packed(ver uint32, size uint32) bool { return ver >= 2 && size < alignedPayloadMin }

// payloadOff is where a record's payload starts, from the record's start,
// in a region of format version ver.
func payloadOff(ver uint32, hlen int, size uint32) int64 {
	if ver >= 2 && size >= alignedPayloadMin {
		return align(int64(hlen))
	}
	return int64(hlen)
}

// recordLen is the bytes a record takes in a region of version ver from
// its start: header and payload, padded to a block unless packed.
func recordLen(ver uint32, hlen int, size uint32) int64 {
	if packed(ver, size) {
		return int64(hlen) + int64(size)
	}
	return align(payloadOff(ver, hlen, size) + int64(size))
}

// recordOff is the file offset of a record whose header's block field is
// block, in a region of version ver.
func recordOff(ver uint32, block uint32) int64 {
	if ver >= 2 {
		return int64(block) * posUnit
	}
	return int64(block) * blockSize
}

// recordStart is where a record of size payload bytes goes in a region of
// version ver whose records end at used.
func recordStart(ver uint32, used int64, size uint32) int64 {
	if packed(ver, size) {
		return (used + posUnit - 1) &^ (posUnit - 1)
	}
	return align(used)
}

// errFormat reports bytes that do not decode as the structure expected.
var errFormat = errors.New("disk: malformed region data")

// align rounds n up to a multiple of blockSize.
func align(n int64) int64 { return (n + blockSize - 1) &^ (blockSize - 1) }

// recHeader is a decoded record header.
type recHeader struct {
	seq   uint64
	block uint32
	size  uint32
	crc   uint32
	id    [32]byte
	ns    string
	meta  []byte // aliases the decoded bytes
	hlen  int
}

// headerLen is the encoded length of a header with these ns and meta.
func headerLen(ns string, meta []byte) int { return recHdrFixed + len(ns) + len(meta) + 4 }

// putHeader encodes h into b (len(b) >= headerLen) and returns its length.
func putHeader(b []byte, h *recHeader) int {
	n := headerLen(h.ns, h.meta)
	le := binary.LittleEndian
	le.PutUint32(b[0:], recMagic)
	le.PutUint16(b[4:], uint16(n))
	b[6] = uint8(len(h.ns))
	le.PutUint16(b[7:], uint16(len(h.meta)))
	le.PutUint64(b[9:], h.seq)
	le.PutUint32(b[17:], h.block)
	le.PutUint32(b[21:], h.size)
	le.PutUint32(b[25:], h.crc)
	copy(b[29:61], h.id[:])
	copy(b[61:], h.ns)
	copy(b[61+len(h.ns):], h.meta)
	le.PutUint32(b[n-4:], crc32c.Checksum(b[:n-4]))
	return n
}

// parseHeader decodes the record header at the start of b. It never
// panics on any input; the error wraps errFormat.
func parseHeader(b []byte) (recHeader, error) {
	var h recHeader
	le := binary.LittleEndian
	if len(b) < recHdrFixed+4 {
		return h, fmt.Errorf("%w: record header needs %d bytes, have %d", errFormat, recHdrFixed+4, len(b))
	}
	if m := le.Uint32(b[0:]); m != recMagic {
		return h, fmt.Errorf("%w: record magic %08x", errFormat, m)
	}
	n := int(le.Uint16(b[4:]))
	nsLen, metaLen := int(b[6]), int(le.Uint16(b[7:]))
	if n != recHdrFixed+nsLen+metaLen+4 || n > len(b) || metaLen > maxMeta {
		return h, fmt.Errorf("%w: record header length %d (ns %d, meta %d, have %d)", errFormat, n, nsLen, metaLen, len(b))
	}
	if got, want := crc32c.Checksum(b[:n-4]), le.Uint32(b[n-4:]); got != want {
		return h, fmt.Errorf("%w: record header crc %08x, want %08x", errFormat, got, want)
	}
	h.seq = le.Uint64(b[9:])
	h.block = le.Uint32(b[17:])
	h.size = le.Uint32(b[21:])
	h.crc = le.Uint32(b[25:])
	copy(h.id[:], b[29:61])
	h.ns = string(b[61 : 61+nsLen])
	h.meta = b[61+nsLen : 61+nsLen+metaLen]
	h.hlen = n
	if h.size == 0 {
		return h, fmt.Errorf("%w: record of 0 bytes", errFormat)
	}
	return h, nil
}

// putRegionHeader encodes the first block of a region file of format
// version ver into b (a block).
func putRegionHeader(b []byte, seq uint64, size int64, ver uint32) {
	clear(b[:blockSize])
	le := binary.LittleEndian
	copy(b, regionMagic)
	le.PutUint32(b[8:], ver)
	le.PutUint64(b[12:], seq)
	le.PutUint64(b[20:], uint64(size))
	le.PutUint32(b[28:], crc32c.Checksum(b[:28]))
}

// parseRegionHeader decodes a region's first block: its seq, size and
// format version (1 or 2).
func parseRegionHeader(b []byte) (seq uint64, size int64, ver uint32, err error) {
	le := binary.LittleEndian
	if len(b) < 32 || string(b[:8]) != regionMagic {
		return 0, 0, 0, fmt.Errorf("%w: not a region header", errFormat)
	}
	if got, want := crc32c.Checksum(b[:28]), le.Uint32(b[28:]); got != want {
		return 0, 0, 0, fmt.Errorf("%w: region header crc %08x, want %08x", errFormat, got, want)
	}
	ver = le.Uint32(b[8:])
	if ver < 1 || ver > version {
		return 0, 0, 0, fmt.Errorf("%w: region version %d, want 1 to %d", errFormat, ver, version)
	}
	return le.Uint64(b[12:]), int64(le.Uint64(b[20:])), ver, nil
}

// footerLen is the encoded (block-aligned) length of a footer whose body
// (the concatenated record headers) is bodyLen bytes.
func footerLen(bodyLen int) int64 { return align(int64(footHdr + bodyLen)) }

// putFooter encodes a footer of count headers (body) into b, which must
// hold footerLen(len(body)) bytes.
func putFooter(b []byte, count int, body []byte) {
	le := binary.LittleEndian
	n := footerLen(len(body))
	clear(b[:n])
	copy(b, footMagic)
	le.PutUint32(b[8:], uint32(count))
	le.PutUint32(b[12:], uint32(len(body)))
	le.PutUint32(b[16:], crc32c.Checksum(body))
	copy(b[footHdr:], body)
}

// parseFooter decodes a footer and returns its record headers, in the
// order they were written. It never panics on any input.
func parseFooter(b []byte) ([]recHeader, error) {
	le := binary.LittleEndian
	if len(b) < footHdr || string(b[:8]) != footMagic {
		return nil, fmt.Errorf("%w: not a footer", errFormat)
	}
	count, bodyLen := int(le.Uint32(b[8:])), int(le.Uint32(b[12:]))
	if bodyLen > len(b)-footHdr || count > bodyLen/(recHdrFixed+4) {
		return nil, fmt.Errorf("%w: footer of %d headers in %d bytes (have %d)", errFormat, count, bodyLen, len(b)-footHdr)
	}
	body := b[footHdr : footHdr+bodyLen]
	if got, want := crc32c.Checksum(body), le.Uint32(b[16:]); got != want {
		return nil, fmt.Errorf("%w: footer crc %08x, want %08x", errFormat, got, want)
	}
	out := make([]recHeader, 0, count)
	for range count {
		h, err := parseHeader(body)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
		body = body[h.hlen:]
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the footer's last header", errFormat, len(body))
	}
	return out, nil
}

// putTrailer encodes the last block of a sealed region into b (a block).
func putTrailer(b []byte, seq uint64, footOff, footLen int64) {
	clear(b[:blockSize])
	le := binary.LittleEndian
	copy(b, tailMagic)
	le.PutUint64(b[8:], uint64(footOff))
	le.PutUint64(b[16:], uint64(footLen))
	le.PutUint64(b[24:], seq)
	le.PutUint32(b[32:], crc32c.Checksum(b[:32]))
}

// parseTrailer decodes a region's last block: where its footer is.
func parseTrailer(b []byte, seq uint64, size int64) (footOff, footLen int64, err error) {
	le := binary.LittleEndian
	if len(b) < 36 || string(b[:8]) != tailMagic {
		return 0, 0, fmt.Errorf("%w: no trailer", errFormat)
	}
	if got, want := crc32c.Checksum(b[:32]), le.Uint32(b[32:]); got != want {
		return 0, 0, fmt.Errorf("%w: trailer crc %08x, want %08x", errFormat, got, want)
	}
	footOff, footLen = int64(le.Uint64(b[8:])), int64(le.Uint64(b[16:]))
	if s := le.Uint64(b[24:]); s != seq {
		return 0, 0, fmt.Errorf("%w: trailer of region %d in region %d", errFormat, s, seq)
	}
	if footOff < blockSize || footOff%blockSize != 0 || footLen <= 0 || footLen%blockSize != 0 || footOff+footLen > size-blockSize {
		return 0, 0, fmt.Errorf("%w: footer at %d+%d in a region of %d bytes", errFormat, footOff, footLen, size)
	}
	return footOff, footLen, nil
}
