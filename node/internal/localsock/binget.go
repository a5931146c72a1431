package localsock

import (
	"encoding/binary"
)

// binaryGet answers a binary get (kvring_get_request without JSON): u8
// flags (only groups), string namespace, string fingerprint, u32 n, n
// 32-byte ids, with flag groups n 32-byte group keys. The reply: u32 n,
// per id u8 found, u64 blob_id, u32 crc32c and string reason; then the
// blobs found as in a create_blobs reply (their descriptors follow).
func (c *conn) binaryGet(r *binReader) ([]byte, []uint32) {
	flags := r.U8()
	ref := decodeRef(r)
	n := r.Count(32)
	ids := r.keys(n)
	var keys [][]byte
	if flags&binPublishGrp != 0 {
		keys = r.keys(n)
	}
	if err := r.done("get"); err != nil {
		return binErrorReply(err), nil
	}
	if flags&^binPublishGrp != 0 {
		return binErrorReply(invalid("binary get: unknown flags %#02x", flags)), nil
	}
	if err := checkRef("get", ref, n); err != nil {
		return binErrorReply(err), nil
	}
	results, bs, err := c.runGet(ref, ids, keys)
	if err != nil {
		return binErrorReply(err), nil
	}
	b := append(make([]byte, 0, 64+len(results)*24+len(bs)*binBlobRecord), binMagic, binGet|binReply)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(results)))
	for _, g := range results {
		found := byte(0)
		if g.found {
			found = 1
		}
		b = binary.LittleEndian.AppendUint64(append(b, found), g.blobID)
		b = binary.LittleEndian.AppendUint32(b, g.crc32c)
		b = appendStr(b, g.reason)
	}
	segs := c.newSegments(bs)
	return c.appendBlobs(b, bs, segs), segs
}

// binaryRelease answers a binary release (kvring_release_request without
// JSON): u32 n, n u64 blob ids → u32 released, how many of them this
// connection held (one reference dropped each; the others are skipped).
func (c *conn) binaryRelease(r *binReader) ([]byte, []uint32) {
	ids := r.u64s()
	if err := r.done("release"); err != nil {
		return binErrorReply(err), nil
	}
	n := c.releaseIDs(ids)
	return binary.LittleEndian.AppendUint32([]byte{binMagic, binRelease | binReply}, uint32(n)), nil
}
