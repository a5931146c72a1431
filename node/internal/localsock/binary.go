package localsock

import (
	"encoding/binary"

	"github.com/kvring/kvring/internal/sockwire"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// The binary framing: a kvring extension for the requests a stream of
// puts sends, create_blobs, publish and lookup, and those of a stream of
// gets, get and release (binget.go), without JSON (a batch of 360 chunks
// of 1 KiB costs a few milliseconds of JSON on each side). Frames are the
// same (an 8-byte little-endian length, then the body); a binary body
// starts with binMagic, which no JSON body does (they start with '{' or
// white space), and gets a binary reply. docs/vineyard.md "Binary framing"
// has the layouts; every integer is little-endian, a string is a u32
// length and its bytes.

const (
	binMagic        = sockwire.Magic
	binCreate       = sockwire.OpCreate
	binPublish      = sockwire.OpPublish
	binLookup       = sockwire.OpLookup
	binGet          = sockwire.OpGet
	binRelease      = sockwire.OpRelease
	binReply        = sockwire.Reply
	binError        = sockwire.OpError
	binBlobRecord   = sockwire.BlobRecord
	binPublishSeal  = sockwire.PublishSeal
	binPublishEat   = sockwire.PublishConsume
	binPublishGrp   = sockwire.PublishGroups
	binPublishCodes = sockwire.PublishCodes
)

// binStatus numbers a publish result's status in a binary reply.
var binStatus = map[string]byte{"stored": 0, "already_held": 1, "rejected": 2, "failed": 3}

// isBinary reports whether a request body is in the binary framing.
func isBinary(body []byte) bool { return len(body) > 0 && body[0] == binMagic }

// handleBinary answers one binary request: the reply body and the segments
// whose descriptors follow it. A request that cannot be decoded, or fails
// as a whole, is an error reply; the connection keeps serving. body is the
// connection's read buffer, reused for the next request: nothing decoded
// from it is kept (ids and keys are copied). It blocks while a publish's
// two-phase write runs (bounded by CallTimeout).
func (c *conn) handleBinary(body []byte) (out []byte, segs []uint32) {
	if !c.registered {
		return binErrorReply(invalid("a binary request before register_request: a connection must register first")), nil
	}
	if len(body) < 2 {
		return binErrorReply(invalid("a binary request without an op")), nil
	}
	r := &binReader{sockwire.Reader{B: body[2:]}}
	switch body[1] {
	case binCreate:
		sizes := r.u64s()
		if err := r.done("create_blobs"); err != nil {
			return binErrorReply(err), nil
		}
		bs, segs, rerr := c.createNext(sizes)
		if rerr != nil {
			return binErrorReply(rerr), nil
		}
		return c.appendBlobs([]byte{binMagic, binCreate | binReply}, bs, segs), segs
	case binPublish:
		a, err := decodePublish(r)
		if err != nil {
			return binErrorReply(err), nil
		}
		o, err := c.runPublish(a)
		if err != nil {
			return binErrorReply(err), nil
		}
		return c.encodePublish(o, a.codes), o.segs
	case binLookup:
		req, err := decodeLookup(r)
		if err != nil {
			return binErrorReply(err), nil
		}
		resp, err := c.runLookup(req)
		if err != nil {
			return binErrorReply(err), nil
		}
		b := binary.LittleEndian.AppendUint64([]byte{binMagic, binLookup | binReply}, resp.GetEpoch())
		b = binary.LittleEndian.AppendUint32(b, resp.GetHeld())
		b = binary.LittleEndian.AppendUint64(b, resp.GetLeaseId())
		return binary.LittleEndian.AppendUint32(b, resp.GetLeaseTtlMs()), nil
	case binGet:
		return c.binaryGet(r)
	case binRelease:
		return c.binaryRelease(r)
	}
	return binErrorReply(errorf(codeNotImplemented, "binary op %#02x is not implemented by kvring", body[1])), nil
}

// decodePublish decodes a binary publish: u8 flags (seal, consume, groups,
// codes), string namespace,
// string fingerprint (raw bytes), u32 n, n 32-byte ids, n u64 blob ids,
// with flag groups n 32-byte group keys, then u32 m and m u64 sizes of
// blobs to create afterwards.
func decodePublish(r *binReader) (publishArgs, error) {
	var a publishArgs
	flags := r.U8()
	a.ref = decodeRef(r)
	n := r.Count(32 + 8)
	a.ids = r.keys(n)
	a.blobs = make([]uint64, n)
	for i := range a.blobs {
		a.blobs[i] = r.U64()
	}
	if flags&binPublishGrp != 0 {
		a.runs = groupRuns(r.keys(n))
	}
	a.createSizes = r.u64s()
	if err := r.done("publish"); err != nil {
		return a, err
	}
	if flags&^(binPublishSeal|binPublishEat|binPublishGrp|binPublishCodes) != 0 {
		return a, invalid("binary publish: unknown flags %#02x", flags)
	}
	if err := checkRef("publish", a.ref, n); err != nil {
		return a, err
	}
	a.seal, a.consume = flags&binPublishSeal != 0, flags&binPublishEat != 0
	a.codes = flags&binPublishCodes != 0
	return a, nil
}

// decodeLookup decodes a binary lookup: u8 flags (only groups), string
// namespace, string fingerprint, u32 n, n 32-byte ids, with flag groups n
// 32-byte group keys, then u32 pin_ttl_ms.
func decodeLookup(r *binReader) (*kvringv1.LookupRequest, error) {
	flags := r.U8()
	req := &kvringv1.LookupRequest{Namespace: decodeRef(r)}
	n := r.Count(32)
	req.Ids = r.keys(n)
	if flags&binPublishGrp != 0 {
		req.Groups = groupRuns(r.keys(n))
	}
	req.PinTtlMs = min(r.U32(), 1<<31)
	if err := r.done("lookup"); err != nil {
		return nil, err
	}
	if flags&^binPublishGrp != 0 {
		return nil, invalid("binary lookup: unknown flags %#02x", flags)
	}
	if err := checkRef("lookup", req.Namespace, n); err != nil {
		return nil, err
	}
	return req, nil
}

// decodeRef reads a namespace and its fingerprint, copied out of the frame.
func decodeRef(r *binReader) *kvringv1.NamespaceRef {
	name := string(r.Str())
	return &kvringv1.NamespaceRef{Name: name, Fingerprint: append([]byte(nil), r.Str()...)}
}

// checkRef refuses an empty namespace or no chunks.
func checkRef(what string, ref *kvringv1.NamespaceRef, n int) error {
	if ref.GetName() == "" {
		return invalid("binary %s: the namespace is empty", what)
	}
	if n == 0 {
		return invalid("binary %s: no chunks", what)
	}
	return nil
}

// encodePublish encodes a publish reply: u64 epoch, u32 n, per chunk u8
// status, u8 degraded, with codes u32 code (PutChunkResult.code), string
// reason, u32 holders and per holder string node_id and string grpc_addr;
// then u8 0 (nothing created), 1 and the blobs as in a create_blobs reply,
// or 2, u32 code and string message (create_error).
func (c *conn) encodePublish(o publishOutcome, codes bool) []byte {
	b := []byte{binMagic, binPublish | binReply}
	b = binary.LittleEndian.AppendUint64(b, o.epoch)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(o.results)))
	for _, r := range o.results {
		st, ok := binStatus[r.Status]
		if !ok {
			st = binStatus["failed"]
		}
		b = append(b, st, 0)
		if r.Degraded {
			b[len(b)-1] = 1
		}
		if codes {
			b = binary.LittleEndian.AppendUint32(b, r.Code)
		}
		b = appendStr(b, r.Reason)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Holders)))
		for _, h := range r.Holders {
			b = appendStr(appendStr(b, h.NodeID), h.GRPCAddr)
		}
	}
	switch {
	case o.createErr != nil:
		b = append(b, 2)
		b = binary.LittleEndian.AppendUint32(b, uint32(o.createErr.Code))
		b = appendStr(b, o.createErr.Message)
	case o.created != nil:
		b = c.appendBlobs(append(b, 1), o.created, o.segs)
	default:
		b = append(b, 0)
	}
	return b
}

// appendBlobs appends u32 n, per blob u64 id, u64 segment (store_fd), u64
// data_offset, u64 data_size, u64 map_size, then u32 k and the k segments
// whose descriptors follow the reply, in order.
func (c *conn) appendBlobs(b []byte, bs []*blob, segs []uint32) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(bs)))
	for _, bl := range bs {
		p := c.payload(bl)
		for _, v := range []uint64{bl.id, uint64(p.StoreFD), uint64(p.DataOffset), uint64(p.DataSize), uint64(p.MapSize)} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(segs)))
	for _, s := range segs {
		b = binary.LittleEndian.AppendUint64(b, uint64(s))
	}
	return b
}

// binErrorReply encodes an error reply: u32 code, string message.
func binErrorReply(err error) []byte {
	re, ok := err.(*replyError)
	if !ok {
		re = errorf(codeUnknownError, "%v", err)
	}
	b := binary.LittleEndian.AppendUint32([]byte{binMagic, binError}, uint32(re.Code))
	return appendStr(b, re.Message)
}

var appendStr = sockwire.AppendStr

// binReader decodes a binary body (sockwire.Reader) with what only the
// server reads: keys and u64 lists.
type binReader struct{ sockwire.Reader }

// keys reads n 32-byte ids or group keys, copied out of the frame (whose
// buffer is reused for the next request); nil after a short read.
func (r *binReader) keys(n int) [][]byte {
	raw := r.Bytes(32 * n)
	if raw == nil {
		return nil
	}
	raw = append([]byte(nil), raw...)
	ks := make([][]byte, n)
	for i := range ks {
		ks[i] = raw[32*i : 32*i+32 : 32*i+32]
	}
	return ks
}

func (r *binReader) u64s() []uint64 {
	n := r.Count(8)
	out := make([]uint64, n)
	for i := range out {
		out[i] = r.U64()
	}
	return out
}

// done reports a short body, or bytes left over, as error 1.
func (r *binReader) done(what string) error {
	switch {
	case r.Err != nil:
		return invalid("binary %s: %v", what, r.Err)
	case len(r.B) > 0:
		return invalid("binary %s: %d bytes after the end of the request", what, len(r.B))
	}
	return nil
}
