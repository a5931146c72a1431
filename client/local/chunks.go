package local

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/kvring/kvring/internal/nsschema"
)

// Namespace names a registered namespace: its name and schema fingerprint.
type Namespace struct {
	Name        string
	Fingerprint []byte
}

// Schema is a namespace's schema: the same type as client.Schema, sent as
// the request's "schema" object.
type Schema = nsschema.Schema

// RegisterNamespace registers name with schema (or checks it matches the
// registered one) and returns the namespace to use in chunk calls.
// replication and minReplicas 0 take the node's defaults.
func (c *Client) RegisterNamespace(name string, schema Schema, replication, minReplicas uint32) (Namespace, error) {
	var r struct {
		Name        string `json:"name"`
		Fingerprint string `json:"fingerprint"`
	}
	err := c.Call(map[string]any{"type": "kvring_register_namespace_request", "name": name, "schema": schema,
		"replication_factor": replication, "min_replicas": minReplicas}, &r)
	if err != nil {
		return Namespace{}, err
	}
	fp, err := hex.DecodeString(r.Fingerprint)
	if err != nil {
		return Namespace{}, fmt.Errorf("register namespace: bad fingerprint %q", r.Fingerprint)
	}
	return Namespace{Name: r.Name, Fingerprint: fp}, nil
}

func (ns Namespace) fields(m map[string]any) map[string]any {
	m["namespace"] = ns.Name
	m["fingerprint"] = hex.EncodeToString(ns.Fingerprint)
	return m
}

func hexIDs(ids [][32]byte) []string {
	out := make([]string, len(ids))
	for i := range ids {
		out[i] = hex.EncodeToString(ids[i][:])
	}
	return out
}

// Holder is a node that holds a published chunk.
type Holder struct {
	NodeID   string `json:"node_id"`
	GRPCAddr string `json:"grpc_addr"`
}

// PublishResult is the outcome of publishing one chunk: Status is
// "stored", "already_held", "rejected" or "failed" (with Reason). Code is
// the gRPC code number that classifies a rejected or failed chunk
// (PutChunkResult.code); 0 otherwise, and from a node from before the codes.
type PublishResult struct {
	ID       string   `json:"id"`
	Status   string   `json:"status"`
	Holders  []Holder `json:"holders"`
	Degraded bool     `json:"degraded"`
	Reason   string   `json:"reason"`
	Code     uint32   `json:"code"`
}

// Held reports whether some node holds the chunk now.
func (r PublishResult) Held() bool { return r.Status == "stored" || r.Status == "already_held" }

// Busy reports whether the chunk failed because another write of it was
// under way on an owner and ended without storing it or did not end in time
// (code ABORTED): publishing it once more, at once, usually stores it, as
// the gRPC SDK's put does (client.Client.Put).
func (r PublishResult) Busy() bool { return r.Status == "failed" && r.Code == uint32(codes.Aborted) }

// Publish writes sealed blobs as the cluster chunks ids (blobs[i] holds
// the bytes of ids[i]) through the node's two-phase write. groups, when the
// namespace groups chunks, is each id's group key; nil otherwise.
func (c *Client) Publish(ns Namespace, ids [][32]byte, blobs []uint64, groups [][32]byte) ([]PublishResult, error) {
	return c.publish(ns, ids, blobs, groups, false, false)
}

// PublishAndDelete is Publish followed, in the same request, by Release and
// Delete of each blob: the blobs' bytes live on as the chunks where this
// node holds them (their slots became the chunks), and their memory is
// freed otherwise. Blob.Data must not be used afterwards. The blobs are
// deleted whatever the results (and when the request fails after reading
// them).
func (c *Client) PublishAndDelete(ns Namespace, ids [][32]byte, blobs []uint64, groups [][32]byte) ([]PublishResult, error) {
	return c.publish(ns, ids, blobs, groups, true, false)
}

// SealPublishAndDelete is PublishAndDelete of blobs this client created and
// wrote but did not seal: the node seals them first, in the same request
// (one request for a whole batch instead of one seal each).
func (c *Client) SealPublishAndDelete(ns Namespace, ids [][32]byte, blobs []uint64, groups [][32]byte) ([]PublishResult, error) {
	return c.publish(ns, ids, blobs, groups, true, true)
}

// SealPublishAndCreate is SealPublishAndDelete that then creates, in the
// same request, one new unsealed blob per size of next, for the next
// chunks: a steady stream of puts costs one request per batch (write the
// blobs, then this) instead of two. The new blobs count in the node's
// memory like CreateBlobs' and are freed if the connection goes unsealed.
// When the publish succeeds and only the creation fails (error 41: no
// room), the results are returned with an error wrapping the *Error and no
// blobs: the chunks are published all the same.
func (c *Client) SealPublishAndCreate(ns Namespace, ids [][32]byte, blobs []uint64, groups [][32]byte, next []int64) ([]PublishResult, []*Blob, error) {
	if c.binary() {
		results, ps, createErr, err := c.publishBin(ns, ids, blobs, groups, true, true, next)
		if !errors.Is(err, errNoBinary) {
			if err != nil {
				return nil, nil, err
			}
			return c.nextBlobs(results, ps, createErr)
		}
	}
	req := c.publishRequest(ns, ids, blobs, groups, true, true)
	req["create_sizes"] = next
	var r struct {
		Results     []PublishResult `json:"results"`
		Payloads    []Payload       `json:"payloads"`
		CreateError *Error          `json:"create_error"`
	}
	_, err := c.roundTrip(req, func(raw []byte) ([]Payload, error) {
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("cannot decode kvring_publish_reply: %w", err)
		}
		return r.Payloads, nil
	})
	if err != nil {
		return nil, nil, err
	}
	var createErr error
	if r.CreateError != nil {
		createErr = r.CreateError
	}
	return c.nextBlobs(r.Results, r.Payloads, createErr)
}

// nextBlobs returns the blobs a publish created (populated), or the
// publish's results with the error that kept them from being created.
func (c *Client) nextBlobs(results []PublishResult, ps []Payload, createErr error) ([]PublishResult, []*Blob, error) {
	if createErr != nil {
		return results, nil, fmt.Errorf("the chunks were published, but cannot create the next blobs: %w", createErr)
	}
	out := make([]*Blob, len(ps))
	for i, p := range ps {
		var err error
		if out[i], err = c.blob(p); err != nil {
			return results, nil, err
		}
		c.populate(p)
	}
	return results, out, nil
}

func (c *Client) publishRequest(ns Namespace, ids [][32]byte, blobs []uint64, groups [][32]byte, consume, seal bool) map[string]any {
	req := ns.fields(map[string]any{"type": "kvring_publish_request", "ids": hexIDs(ids), "blobs": blobs})
	if consume {
		req["consume"] = true
	}
	if seal {
		req["seal"] = true
	}
	if groups != nil {
		req["groups"] = hexIDs(groups)
	}
	return req
}

func (c *Client) publish(ns Namespace, ids [][32]byte, blobs []uint64, groups [][32]byte, consume, seal bool) ([]PublishResult, error) {
	if c.binary() {
		results, _, _, err := c.publishBin(ns, ids, blobs, groups, consume, seal, nil)
		if !errors.Is(err, errNoBinary) {
			return results, err
		}
	}
	req := c.publishRequest(ns, ids, blobs, groups, consume, seal)
	var r struct {
		Results []PublishResult `json:"results"`
	}
	if err := c.Call(req, &r); err != nil {
		return nil, err
	}
	return r.Results, nil
}

// LookupResult is the held prefix of a lookup and its pin lease (0: none).
type LookupResult struct {
	Held       int    `json:"held"`
	LeaseID    uint64 `json:"lease_id"`
	LeaseTTLMs uint32 `json:"lease_ttl_ms"`
}

// Lookup counts how many leading ids are held now; pinTTLMs > 0 pins them
// under a lease that ReleaseLease (or the connection's end) releases.
func (c *Client) Lookup(ns Namespace, ids [][32]byte, groups [][32]byte, pinTTLMs uint32) (LookupResult, error) {
	if c.binary() {
		res, err := c.lookupBin(ns, ids, groups, pinTTLMs)
		if !errors.Is(err, errNoBinary) {
			return res, err
		}
	}
	req := ns.fields(map[string]any{"type": "kvring_lookup_request", "ids": hexIDs(ids), "pin_ttl_ms": pinTTLMs})
	if groups != nil {
		req["groups"] = hexIDs(groups)
	}
	var r LookupResult
	err := c.Call(req, &r)
	return r, err
}

// ReleaseLease ends a lookup lease.
func (c *Client) ReleaseLease(lease uint64) (bool, error) {
	var r struct {
		Released bool `json:"released"`
	}
	err := c.Call(map[string]any{"type": "kvring_release_lease_request", "lease_id": lease}, &r)
	return r.Released, err
}

// ChunkResult is one chunk of GetChunks: Blob (referenced until Release of
// its ID) when found, else the Reason.
type ChunkResult struct {
	ID     string `json:"id"`
	Found  bool   `json:"found"`
	BlobID uint64 `json:"blob_id"`
	// CRC32C is the chunk's CRC-32C (Castagnoli) when found. A chunk the
	// node holds is handed out in place without a checksum pass: verify
	// its bytes against it when they must be proven intact.
	CRC32C uint32 `json:"crc32c"`
	Reason string `json:"reason"`
	Blob   *Blob  `json:"-"`
}

// GetChunks returns cluster chunks as blobs through this client's
// mappings, one result per id: a chunk the node holds is its own slot
// (no copy), the others are fetched from their owners into blobs of the
// node's memory first. Each blob found is referenced until Release of its
// ID; its bytes must not be written.
func (c *Client) GetChunks(ns Namespace, ids [][32]byte, groups [][32]byte) ([]ChunkResult, error) {
	if c.binGet() {
		res, err := c.getBin(ns, ids, groups)
		if !errors.Is(err, errNoBinary) {
			return res, err
		}
	}
	req := ns.fields(map[string]any{"type": "kvring_get_request", "ids": hexIDs(ids)})
	if groups != nil {
		req["groups"] = hexIDs(groups)
	}
	var r struct {
		Payloads []Payload     `json:"payloads"`
		Results  []ChunkResult `json:"results"`
	}
	_, err := c.roundTrip(req, func(raw []byte) ([]Payload, error) {
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("cannot decode kvring_get_reply: %w", err)
		}
		return r.Payloads, nil
	})
	if err != nil {
		return nil, err
	}
	return c.attach(r.Results, r.Payloads)
}
