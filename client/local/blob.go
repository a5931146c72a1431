package local

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Payload describes a blob as the node does: its segment (StoreFD) and
// where in the segment file its bytes are.
type Payload struct {
	ObjectID   uint64 `json:"object_id"`
	StoreFD    int64  `json:"store_fd"`
	DataOffset int64  `json:"data_offset"`
	DataSize   int64  `json:"data_size"`
	MapSize    int64  `json:"map_size"`
	Pointer    uint64 `json:"pointer"`
	IsSealed   bool   `json:"is_sealed"`
}

// Blob is a blob the node described, with its bytes in this client's
// mapping of the segment. Data may be written until the blob is sealed and
// read until it is released or deleted; it is invalid after Close.
type Blob struct {
	ID     uint64
	Sealed bool
	Data   []byte
}

// ErrOutOfRange: WriteAt was asked to write past the blob's end.
var ErrOutOfRange = errors.New("kvring local socket: write past the end of the blob")

// WriteAt copies p into the blob's bytes at off (io.WriterAt), through this
// client's mapping: copy into Data with a bounds check. It writes nothing
// and returns ErrOutOfRange when p does not fit. It keeps no reference to p
// and does not block; like Data it may be used until the blob is sealed.
// (One copy, however large: Go's copy of 1 MiB or more on amd64 streams the
// bytes past the caches, which is the fastest way to write them, and the
// node's checksum reads them from memory at ~18 GB/s on the reference host;
// copying in pieces below 1 MiB, to keep them in the caches, measured 6-7 %
// slower for 2 MiB blobs in BenchmarkSocketPutVsGRPC.)
func (b *Blob) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b.Data)) || int64(len(p)) > int64(len(b.Data))-off {
		return 0, fmt.Errorf("%w: %d bytes at %d of a blob of %d", ErrOutOfRange, len(p), off, len(b.Data))
	}
	return copy(b.Data[off:], p), nil
}

// blob returns the Blob of p through the mapping of its segment. mu need
// not be held: maps only grows until Close.
func (c *Client) blob(p Payload) (*Blob, error) {
	b := &Blob{ID: p.ObjectID, Sealed: p.IsSealed}
	if p.DataSize == 0 {
		return b, nil
	}
	c.mu.Lock()
	m, ok := c.maps[p.StoreFD]
	c.mu.Unlock()
	if !ok || p.DataOffset < 0 || p.DataOffset+p.DataSize > int64(len(m)) {
		return nil, fmt.Errorf("blob %#x: segment %d is not mapped or too short", p.ObjectID, p.StoreFD)
	}
	b.Data = m[p.DataOffset : p.DataOffset+p.DataSize : p.DataOffset+p.DataSize]
	return b, nil
}

// payloadsOf decodes the payloads of a reply: "created" (create_buffer) or
// "payloads".
func payloadsOf(raw json.RawMessage) ([]Payload, error) {
	var r struct {
		Created  *Payload  `json:"created"`
		Payloads []Payload `json:"payloads"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("cannot decode payloads: %w", err)
	}
	if r.Created != nil {
		return []Payload{*r.Created}, nil
	}
	return r.Payloads, nil
}

// blobCall sends req, receives the descriptors its reply announces and
// returns the described blobs and their payloads.
func (c *Client) blobCall(req any) ([]*Blob, []Payload, error) {
	var ps []Payload
	_, err := c.roundTrip(req, func(raw []byte) ([]Payload, error) {
		var err error
		ps, err = payloadsOf(raw)
		return ps, err
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

// CreateBlob creates an unsealed blob of size bytes; write its Data, then
// Seal it. An unsealed blob is freed when the connection goes away.
func (c *Client) CreateBlob(size int64) (*Blob, error) {
	bs, ps, err := c.create([]int64{size}, func() ([]*Blob, []Payload, error) {
		return c.blobCall(map[string]any{"type": "create_buffer_request", "size": size})
	})
	if err != nil {
		return nil, err
	}
	if len(bs) != 1 {
		return nil, fmt.Errorf("create_buffer: the node described %d blobs", len(bs))
	}
	c.populate(ps[0])
	return bs[0], nil
}

// CreateBlobs creates one unsealed blob per size in one request.
func (c *Client) CreateBlobs(sizes []int64) ([]*Blob, error) {
	bs, ps, err := c.create(sizes, func() ([]*Blob, []Payload, error) {
		return c.blobCall(map[string]any{"type": "create_buffers_request", "num": len(sizes), "sizes": sizes})
	})
	for _, p := range ps {
		c.populate(p)
	}
	return bs, err
}

// create creates blobs of sizes in the binary framing, or with the JSON
// call viaJSON when the client speaks JSON.
func (c *Client) create(sizes []int64, viaJSON func() ([]*Blob, []Payload, error)) ([]*Blob, []Payload, error) {
	if c.binary() {
		bs, ps, err := c.createBin(sizes)
		if !errors.Is(err, errNoBinary) {
			return bs, ps, err
		}
	}
	return viaJSON()
}

// Seal makes a blob immutable and readable by others.
func (c *Client) Seal(id uint64) error {
	return c.Call(map[string]any{"type": "seal_request", "object_id": id}, nil)
}

// GetBlobs returns the blobs of ids the node knows (others are left out),
// each with a reference this connection holds until Release. An unsealed
// blob is an error unless unsafe.
func (c *Client) GetBlobs(ids []uint64, unsafe bool) ([]*Blob, error) {
	bs, _, err := c.blobCall(map[string]any{"type": "get_buffers_request", "ids": ids, "unsafe": unsafe})
	return bs, err
}

// Release drops one reference to a blob.
func (c *Client) Release(id uint64) error {
	return c.Call(map[string]any{"type": "release_request", "object_id": id}, nil)
}

// ReleaseAll drops one reference to each blob of ids in one request
// (kvring_release_request, or its binary form after a binary get) and
// returns how many this connection held. ReleaseLater does the same
// without a round trip of its own.
func (c *Client) ReleaseAll(ids []uint64) (int, error) {
	raw, err := c.roundTrip(releaseIDs(ids), nil)
	if err != nil {
		return 0, err
	}
	return releasedOf(raw)
}

// IncreaseRefs takes one more reference to each blob of ids.
func (c *Client) IncreaseRefs(ids []uint64) error {
	return c.Call(map[string]any{"type": "increase_reference_count_request", "ids": ids}, nil)
}

// Drop frees an unsealed blob.
func (c *Client) Drop(id uint64) error {
	return c.Call(map[string]any{"type": "drop_buffer_request", "id": id}, nil)
}

// Delete deletes objects; a blob's memory is freed once no connection
// holds a reference to it.
func (c *Client) Delete(ids ...uint64) error {
	return c.Call(map[string]any{"type": "del_data_request", "id": ids, "force": false, "deep": true,
		"fastpath": false, "memory_trim": false}, nil)
}

// Status is the node's instance_status.
type Status struct {
	InstanceID     uint64 `json:"instance_id"`
	MemoryUsage    int64  `json:"memory_usage"`
	MemoryLimit    int64  `json:"memory_limit"`
	IPCConnections int    `json:"ipc_connections"`
}

// InstanceStatus asks for the node's memory usage and connections.
func (c *Client) InstanceStatus() (Status, error) {
	var r struct {
		Meta Status `json:"meta"`
	}
	err := c.Call(map[string]any{"type": "instance_status_request"}, &r)
	return r.Meta, err
}
