package local

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// The binary get and release (docs/vineyard.md "Binary framing", ops 4 and
// 5): kvring_get_request and kvring_release_request without JSON. A node
// with the framing but from before these ops answers op 4 with error 6;
// the client then gets in JSON for the rest of the connection. The binary
// release is sent only on a connection where a binary get succeeded, so a
// release (whose answer may be read later, ReleaseLater) never meets a
// node that does not know it.

// binGet reports whether a get is to be sent in the binary framing.
func (c *Client) binGet() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.cfg.JSON && !c.noBinary && !c.noBinGet
}

// getBin is GetChunks in the binary framing; errNoBinary when the node
// does not know it (nothing was done).
func (c *Client) getBin(ns Namespace, ids [][32]byte, groups [][32]byte) ([]ChunkResult, error) {
	req := idsRequest(binGetOp, ns, ids, groups)
	var results []ChunkResult
	var ps []Payload
	_, err := c.roundTrip(binRequest(req), func(raw []byte) ([]Payload, error) {
		r, err := binBody(raw, binGetOp)
		if err != nil {
			return nil, err
		}
		results = make([]ChunkResult, r.Count(1+8+4+4))
		for i := range results {
			res := &results[i]
			res.Found, res.BlobID, res.CRC32C, res.Reason = r.U8() != 0, r.U64(), r.U32(), string(r.Str())
			if i < len(ids) {
				res.ID = hex.EncodeToString(ids[i][:])
			}
		}
		ps = r.payloads()
		return ps, r.done("get reply")
	})
	var e *Error
	if errors.As(err, &e) && e.Code == 6 {
		c.mu.Lock()
		c.noBinGet = true // a node from before the binary get
		c.mu.Unlock()
		return nil, errNoBinary
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.binGetOK = true
	c.mu.Unlock()
	return c.attach(results, ps)
}

// attach points each found result at its blob, through this client's
// mappings.
func (c *Client) attach(results []ChunkResult, ps []Payload) ([]ChunkResult, error) {
	byID := make(map[uint64]*Blob, len(ps))
	for _, p := range ps {
		b, err := c.blob(p)
		if err != nil {
			return nil, err
		}
		byID[b.ID] = b
	}
	for i := range results {
		if results[i].Found {
			results[i].Blob = byID[results[i].BlobID]
		}
	}
	return results, nil
}

// releaseRequest is the request that releases ids: binary on a connection
// where a binary get succeeded, else kvring_release_request. mu held.
func (c *Client) releaseRequest(ids []uint64) any {
	if !c.binGetOK {
		return map[string]any{"type": "kvring_release_request", "ids": ids}
	}
	req := binary.LittleEndian.AppendUint32(append(make([]byte, 0, 6+8*len(ids)), binMagic, binReleaseOp), uint32(len(ids)))
	for _, id := range ids {
		req = binary.LittleEndian.AppendUint64(req, id)
	}
	return binRequest(req)
}

// releasedOf decodes the answer to releaseRequest: how many references
// were released.
func releasedOf(raw []byte) (int, error) {
	if len(raw) >= 2 && raw[0] == binMagic {
		r, err := binBody(raw, binReleaseOp)
		if err != nil {
			return 0, err
		}
		n := int(r.U32())
		return n, r.done("release reply")
	}
	var r struct {
		Released *int `json:"released"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.Released == nil {
		return 0, fmt.Errorf("cannot decode kvring_release_reply %.80q: %v", raw, err)
	}
	return *r.Released, nil
}
