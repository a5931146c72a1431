package local

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/kvring/kvring/internal/sockwire"
)

// The binary framing of create_blobs, publish and lookup (docs/vineyard.md
// "Binary framing"): the same requests as create_buffers_request,
// kvring_publish_request and kvring_lookup_request without JSON on either
// side. The client uses it
// unless Config.JSON is set or the node answered a binary request with a
// JSON error (a node from before the framing): the connection then falls
// back to JSON for good.

const (
	binMagic        = sockwire.Magic
	binCreate       = sockwire.OpCreate
	binPublish      = sockwire.OpPublish
	binLookup       = sockwire.OpLookup
	binGetOp        = sockwire.OpGet
	binReleaseOp    = sockwire.OpRelease
	binReply        = sockwire.Reply
	binError        = sockwire.OpError
	binBlobRecord   = sockwire.BlobRecord
	binPublishSeal  = sockwire.PublishSeal
	binPublishEat   = sockwire.PublishConsume
	binPublishGrp   = sockwire.PublishGroups
	binPublishCodes = sockwire.PublishCodes
)

// binRequest is a request body in the binary framing, written as it is.
type binRequest []byte

// errNoBinary: the node does not speak the binary framing; the request had
// no effect and is to be sent again in JSON.
var errNoBinary = errors.New("kvring local socket: the node does not speak the binary framing")

var binStatusName = sockwire.StatusNames

// binary reports whether calls use the binary framing.
func (c *Client) binary() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.cfg.JSON && !c.noBinary
}

// createBin creates blobs of sizes with one binary create_blobs.
func (c *Client) createBin(sizes []int64) ([]*Blob, []Payload, error) {
	req := binary.LittleEndian.AppendUint32([]byte{binMagic, binCreate}, uint32(len(sizes)))
	for _, s := range sizes {
		req = binary.LittleEndian.AppendUint64(req, uint64(s))
	}
	var ps []Payload
	_, err := c.roundTrip(binRequest(req), func(raw []byte) ([]Payload, error) {
		r, err := binBody(raw, binCreate)
		if err != nil {
			return nil, err
		}
		ps = r.payloads()
		return ps, r.done("create_blobs reply")
	})
	if err != nil {
		return nil, nil, err
	}
	bs := make([]*Blob, len(ps))
	for i, p := range ps {
		if bs[i], err = c.blob(p); err != nil {
			return nil, nil, err
		}
	}
	return bs, ps, nil
}

// publishBin is a binary publish: the results and, with next, the blobs
// created (or the *Error that kept them from being created).
func (c *Client) publishBin(ns Namespace, ids [][32]byte, blobs []uint64, groups [][32]byte, consume, seal bool, next []int64) ([]PublishResult, []Payload, error, error) {
	flags := c.publishFlags(consume, seal, groups != nil)
	req := encodePublish(flags, ns, ids, blobs, groups, next)
	var results []PublishResult
	var ps []Payload
	var createErr error
	_, err := c.roundTrip(binRequest(req), func(raw []byte) ([]Payload, error) {
		r, err := binBody(raw, binPublish)
		if err != nil {
			return nil, err
		}
		r.U64() // epoch
		results = decodePublishResults(r, ids, flags&binPublishCodes != 0)
		switch r.U8() {
		case 1:
			ps = r.payloads()
		case 2:
			code := r.U32()
			createErr = &Error{Code: int(code), Message: string(r.Str())}
		}
		return ps, r.done("publish reply")
	})
	var e *Error
	if flags&binPublishCodes != 0 && errors.As(err, &e) && e.Code == 1 && strings.Contains(e.Message, "unknown flags") {
		// A node with the binary framing from before the codes: it decoded
		// the request and did nothing. Send it again without them.
		c.mu.Lock()
		c.noCodes = true
		c.mu.Unlock()
		return c.publishBin(ns, ids, blobs, groups, consume, seal, next)
	}
	return results, ps, createErr, err
}

// publishFlags are the flags of a binary publish request.
func (c *Client) publishFlags(consume, seal, grouped bool) byte {
	var flags byte
	if seal {
		flags |= binPublishSeal
	}
	if consume {
		flags |= binPublishEat
	}
	if grouped {
		flags |= binPublishGrp
	}
	c.mu.Lock()
	if !c.noCodes {
		flags |= binPublishCodes
	}
	c.mu.Unlock()
	return flags
}

// encodePublish is the body of a binary publish request.
func encodePublish(flags byte, ns Namespace, ids [][32]byte, blobs []uint64, groups [][32]byte, next []int64) []byte {
	req := append(make([]byte, 0, 64+len(ids)*72), binMagic, binPublish, flags)
	req = appendStr(req, ns.Name)
	req = appendStr(req, string(ns.Fingerprint))
	req = binary.LittleEndian.AppendUint32(req, uint32(len(ids)))
	for i := range ids {
		req = append(req, ids[i][:]...)
	}
	for _, b := range blobs {
		req = binary.LittleEndian.AppendUint64(req, b)
	}
	for i := range groups {
		req = append(req, groups[i][:]...)
	}
	req = binary.LittleEndian.AppendUint32(req, uint32(len(next)))
	for _, s := range next {
		req = binary.LittleEndian.AppendUint64(req, uint64(s))
	}
	return req
}

// decodePublishResults reads the per-chunk results of a binary publish
// reply (each with its code when codes is set).
func decodePublishResults(r *binReader, ids [][32]byte, codes bool) []PublishResult {
	each := 1 + 1 + 4 + 4
	if codes {
		each += 4
	}
	results := make([]PublishResult, r.Count(each))
	for i := range results {
		st, degraded := r.U8(), r.U8()
		res := &results[i]
		if codes {
			res.Code = r.U32()
		}
		if int(st) < len(binStatusName) {
			res.Status = binStatusName[st]
		} else {
			res.Status = "failed"
		}
		if i < len(ids) {
			res.ID = hex.EncodeToString(ids[i][:])
		}
		res.Degraded = degraded != 0
		res.Reason = string(r.Str())
		res.Holders = make([]Holder, r.Count(8))
		for k := range res.Holders {
			res.Holders[k] = Holder{NodeID: string(r.Str()), GRPCAddr: string(r.Str())}
		}
	}
	return results
}

// idsRequest is the start of a binary request of op about ids in ns: the
// header (with binPublishGrp when groups are given), the namespace and its
// fingerprint, the id count, the ids, then the groups. Lookup and get share
// it; the caller appends what its op adds.
func idsRequest(op byte, ns Namespace, ids [][32]byte, groups [][32]byte) []byte {
	var flags byte
	if groups != nil {
		flags |= binPublishGrp
	}
	req := append(make([]byte, 0, 64+len(ids)*64), binMagic, op, flags)
	req = appendStr(req, ns.Name)
	req = appendStr(req, string(ns.Fingerprint))
	req = binary.LittleEndian.AppendUint32(req, uint32(len(ids)))
	for i := range ids {
		req = append(req, ids[i][:]...)
	}
	for i := range groups {
		req = append(req, groups[i][:]...)
	}
	return req
}

// lookupBin is a binary lookup.
func (c *Client) lookupBin(ns Namespace, ids [][32]byte, groups [][32]byte, pinTTLMs uint32) (LookupResult, error) {
	req := idsRequest(binLookup, ns, ids, groups)
	req = binary.LittleEndian.AppendUint32(req, pinTTLMs)
	raw, err := c.roundTrip(binRequest(req), nil)
	if err != nil {
		return LookupResult{}, err
	}
	r, err := binBody(raw, binLookup)
	if err != nil {
		return LookupResult{}, err
	}
	r.U64() // epoch
	out := LookupResult{Held: int(r.U32()), LeaseID: r.U64(), LeaseTTLMs: r.U32()}
	return out, r.done("lookup reply")
}

// binBody checks a reply is the binary reply to op and returns a reader of
// what follows the op.
func binBody(raw []byte, op byte) (*binReader, error) {
	if len(raw) < 2 || raw[0] != binMagic || raw[1] != op|binReply {
		return nil, fmt.Errorf("the node's reply to binary op %#02x is not its binary reply", op)
	}
	return &binReader{sockwire.Reader{B: raw[2:]}}, nil
}

// binErrorOf decodes a binary error reply (after its op byte).
func binErrorOf(b []byte) error {
	r := &binReader{sockwire.Reader{B: b}}
	code := r.U32()
	msg := string(r.Str())
	if r.Err != nil {
		return fmt.Errorf("cannot decode an error reply: %w", r.Err)
	}
	return &Error{Code: int(code), Message: msg}
}

var appendStr = sockwire.AppendStr

// binReader decodes a binary reply (sockwire.Reader) with what only the
// client reads: blob payloads.
type binReader struct{ sockwire.Reader }

// payloads reads u32 n blobs (id, segment, offset, size, map size) and the
// list of segments whose descriptors follow (the client maps them as the
// payloads name them).
func (r *binReader) payloads() []Payload {
	ps := make([]Payload, r.Count(binBlobRecord))
	for i := range ps {
		ps[i] = Payload{ObjectID: r.U64(), StoreFD: int64(r.U64()), DataOffset: int64(r.U64()),
			DataSize: int64(r.U64()), MapSize: int64(r.U64())}
	}
	for range r.Count(8) {
		r.U64()
	}
	return ps
}

func (r *binReader) done(what string) error {
	switch {
	case r.Err != nil:
		return fmt.Errorf("cannot decode the %s: %w", what, r.Err)
	case len(r.B) > 0:
		return fmt.Errorf("cannot decode the %s: %d bytes left over", what, len(r.B))
	}
	return nil
}
