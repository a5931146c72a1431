// Package sockwire holds what the local socket's binary framing (a kvring
// extension beside the Vineyard JSON messages, docs/vineyard.md "Binary
// framing") looks like on the wire, shared by the node's server
// (node/internal/localsock) and the Go client (client/local): the op and
// flag bytes, a reader of little-endian fields, and the one write both ends
// make (WriteAll). It keeps no state.
package sockwire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Every binary body starts with Magic, which no JSON body does (they start
// with '{' or white space), then an op byte; a reply's op is the request's
// or'ed with Reply, or OpError for an error reply (u32 code, string message).
const (
	Magic      = 0xB1
	OpCreate   = 0x01 // create_blobs
	OpPublish  = 0x02 // publish
	OpLookup   = 0x03 // lookup
	OpGet      = 0x04 // get chunks as blobs (kvring_get_request)
	OpRelease  = 0x05 // release blobs (kvring_release_request)
	Reply      = 0x80
	OpError    = 0xFF
	BlobRecord = 40 // bytes per blob in a reply: id, segment, offset, size, map size (u64 each)
)

// Publish request flags.
const (
	PublishSeal    = 1 << 0
	PublishConsume = 1 << 1
	PublishGroups  = 1 << 2 // group keys follow the blob ids
	// PublishCodes asks for each chunk's code (u32, after its degraded
	// byte) in the reply; without it the reply is as before the codes, for
	// clients that do not know them, and a node from before the codes
	// refuses the flag (error 1, unknown flags).
	PublishCodes = 1 << 3
)

// StatusNames are a publish result's statuses by their number in a binary
// reply.
var StatusNames = [...]string{"stored", "already_held", "rejected", "failed"}

// AppendStr appends a string: u32 length, then its bytes.
func AppendStr(b []byte, s string) []byte {
	return append(binary.LittleEndian.AppendUint32(b, uint32(len(s))), s...)
}

// Reader decodes a binary body. The first short read sets Err; later reads
// return zeros, so a decoder checks once, at the end. The slices it returns
// alias the body.
type Reader struct {
	B   []byte // what is left to read
	Err error
}

// Bytes reads n bytes.
func (r *Reader) Bytes(n int) []byte {
	if r.Err != nil || n < 0 || n > len(r.B) {
		if r.Err == nil {
			r.Err = fmt.Errorf("the body ends %d bytes short", n-len(r.B))
		}
		return nil
	}
	p := r.B[:n:n]
	r.B = r.B[n:]
	return p
}

// U8 reads a byte.
func (r *Reader) U8() byte {
	if p := r.Bytes(1); p != nil {
		return p[0]
	}
	return 0
}

// U32 reads a little-endian uint32.
func (r *Reader) U32() uint32 {
	if p := r.Bytes(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

// U64 reads a little-endian uint64.
func (r *Reader) U64() uint64 {
	if p := r.Bytes(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// Count reads a u32 count of items of at least each bytes and checks the
// rest of the body can hold them, so a wrong count allocates nothing.
func (r *Reader) Count(each int) int {
	n := r.U32()
	if r.Err == nil && uint64(n)*uint64(each) > uint64(len(r.B)) {
		r.Err = fmt.Errorf("a count of %d items of %d bytes in a body with %d bytes left", n, each, len(r.B))
	}
	if r.Err != nil || n > math.MaxInt32 {
		return 0
	}
	return int(n)
}

// Str reads a string (u32 length, then its bytes).
func (r *Reader) Str() []byte { return r.Bytes(r.Count(1)) }
