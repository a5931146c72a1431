package localsock

import (
	"encoding/hex"
	"errors"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// publishArgs is a publish request, decoded from JSON (kvring_publish_request)
// or the binary framing (binary.go).
type publishArgs struct {
	ref           *kvringv1.NamespaceRef
	ids           [][]byte // 32 bytes each
	blobs         []uint64
	runs          []*kvringv1.GroupRun
	seal, consume bool
	createSizes   []uint64
	codes         bool // binary: the reply carries each chunk's code (flag binPublishCodes)
}

// publishOutcome is what a publish did: one result per chunk and, with
// createSizes, the new blobs (or why they could not be made).
type publishOutcome struct {
	epoch     uint64
	results   []publishResult
	created   []*blob
	segs      []uint32 // segments of created whose descriptors follow the reply
	createErr *replyError
}

var putStatus = map[kvringv1.PutStatus]string{kvringv1.PutStatus_PUT_STATUS_STORED: "stored",
	kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD: "already_held", kvringv1.PutStatus_PUT_STATUS_REJECTED: "rejected",
	kvringv1.PutStatus_PUT_STATUS_FAILED: "failed"}

// publish writes sealed blobs as cluster chunks, through the same
// two-phase write as a gRPC Put (when this node owns a chunk, the blob's
// slot becomes it): {namespace, fingerprint, ids[], blobs[], groups[]?,
// seal?, consume?, create_sizes[]?} → one result per chunk. seal first
// seals the blobs this connection created and has not sealed; consume
// deletes the blobs afterwards (see consume); create_sizes then creates
// new blobs for the connection's next chunks (see createNext): payloads[],
// ids[], fds[] (then the descriptors), or create_error {code, message}.
func (c *conn) publish(r request) (reply, error) {
	a, err := parsePublish(r)
	if err != nil {
		return reply{}, err
	}
	out, err := c.runPublish(a)
	if err != nil {
		return reply{}, err
	}
	body := ok("kvring_publish_reply")
	body["epoch"] = out.epoch
	body["results"] = out.results
	if out.createErr != nil {
		body["create_error"] = out.createErr
	}
	if out.created != nil {
		ids := make([]uint64, len(out.created))
		payloads := make([]payload, len(out.created))
		for i, b := range out.created {
			ids[i], payloads[i] = b.id, c.payload(b)
		}
		body["ids"], body["payloads"], body["fds"] = ids, payloads, segFDs(out.segs)
	}
	return reply{body: body, segs: out.segs}, nil
}

// segFDs is the fds list of a reply: the segments whose descriptors follow.
func segFDs(segs []uint32) []int64 {
	fds := make([]int64, len(segs))
	for i, s := range segs {
		fds[i] = int64(s)
	}
	return fds
}

// parsePublish decodes kvring_publish_request.
func parsePublish(r request) (publishArgs, error) {
	var a publishArgs
	var err error
	if a.createSizes, _, err = r.u64s("create_sizes"); err != nil {
		return a, err
	}
	if a.ref, err = namespaceRef(r); err != nil {
		return a, err
	}
	if a.ids, err = chunkIDs(r, "ids"); err != nil {
		return a, err
	}
	if a.blobs, _, err = r.u64s("blobs"); err != nil {
		return a, err
	}
	if len(a.ids) == 0 || len(a.ids) != len(a.blobs) {
		return a, invalid("kvring_publish_request: %d ids and %d blobs; want one blob per id, at least one", len(a.ids), len(a.blobs))
	}
	if a.runs, err = groups(r, len(a.ids)); err != nil {
		return a, err
	}
	if a.consume, err = r.boolean("consume"); err != nil {
		return a, err
	}
	if a.seal, err = r.boolean("seal"); err != nil {
		return a, err
	}
	return a, nil
}

// runPublish publishes a's blobs (see publish) and creates a's createSizes
// blobs. An error is an error reply: nothing was published, and nothing is
// created. The creation runs while the publish does: a fresh slot's pages
// are allocated and zeroed when it is created (store.CreateBlob), about 1 ms
// per MiB on a VM, as long as the publish itself or longer. When it finds
// no room (41), it is tried again once the published blobs are consumed,
// which may have freed some.
func (c *conn) runPublish(a publishArgs) (publishOutcome, error) {
	if len(a.createSizes) == 0 {
		return c.publishBlobs(a)
	}
	type made struct {
		bs  []*blob
		err *replyError
	}
	ch := make(chan made, 1)
	go func() {
		bs, err := c.createBlobs(a.createSizes)
		ch <- made{bs, err}
	}()
	out, err := c.publishBlobs(a)
	m := <-ch
	if err != nil {
		c.dropCreated(m.bs)
		return out, err
	}
	if m.err != nil && m.err.Code == codeNotEnoughMemory {
		m.bs, m.err = c.createBlobs(a.createSizes)
	}
	if m.err != nil {
		out.createErr = m.err
		return out, nil
	}
	out.created, out.segs = m.bs, c.newSegments(m.bs)
	return out, nil
}

// createNext creates the blobs of sizes, all or none, as
// create_buffers_request does, and returns them with the segments whose
// descriptors must follow the reply.
func (c *conn) createNext(sizes []uint64) ([]*blob, []uint32, *replyError) {
	bs, err := c.createBlobs(sizes)
	if err != nil {
		return nil, nil, err
	}
	return bs, c.newSegments(bs), nil
}

// createBlobs creates blobs of sizes, all or none. Safe to run beside the
// connection's own goroutine (the blob table has its lock; the segments sent
// are the caller's, newSegments).
func (c *conn) createBlobs(sizes []uint64) ([]*blob, *replyError) {
	bs := make([]*blob, 0, len(sizes))
	for _, size := range sizes {
		b, err := c.create(size)
		if err != nil {
			c.dropCreated(bs)
			var re *replyError
			if !errors.As(err, &re) {
				re = errorf(codeUnknownError, "%v", err)
			}
			return nil, re
		}
		bs = append(bs, b)
	}
	return bs, nil
}

// publishBlobs is runPublish without the creation.
func (c *conn) publishBlobs(a publishArgs) (publishOutcome, error) {
	cl, err := c.cluster()
	if err != nil {
		return publishOutcome{}, err
	}
	// Hold a reference to each blob while its bytes are read.
	t := c.s.tab
	t.mu.Lock()
	bs := make([]*blob, len(a.blobs))
	for i, id := range a.blobs {
		b := t.lookupBlob(id)
		switch {
		case b == nil || b.size == 0:
			t.mu.Unlock()
			c.dropTemp(bs[:i])
			return publishOutcome{}, errorf(codeObjectNotExists, "kvring_publish_request: blobs[%d] %s does not exist (or is empty)", i, objectName(id))
		case !b.sealed && a.seal && b.creator == c:
			b.sealed = true // as seal_request would
			t.unsealed(b)
		case !b.sealed:
			t.mu.Unlock()
			c.dropTemp(bs[:i])
			return publishOutcome{}, errorf(codeObjectNotSealed, "kvring_publish_request: blobs[%d] %s is not sealed", i, objectName(id))
		}
		t.addRef(c, b)
		bs[i] = b
	}
	t.mu.Unlock()
	defer c.dropTemp(bs)
	if a.consume {
		defer c.consume(bs)
	}
	refs := make([]*kvringv1.ChunkRef, len(bs))
	mems := make([]*store.Blob, len(bs))
	for i, b := range bs {
		if b.mem == nil {
			return publishOutcome{}, errorf(codeObjectIsBlob, "kvring_publish_request: blobs[%d] is a chunk read with kvring_get, not a blob to publish", i)
		}
		sum, err := b.mem.Checksum()
		if err != nil {
			return publishOutcome{}, errorf(codeUnknownError, "kvring_publish_request: cannot read blobs[%d]: %v", i, err)
		}
		refs[i] = &kvringv1.ChunkRef{Id: a.ids[i], Size: uint64(b.size), Crc32C: sum}
		mems[i] = b.mem
	}
	ctx, cancel := c.ctx()
	defer cancel()
	res, err := cl.Publish(ctx, &kvringv1.PutBegin{Namespace: a.ref, Chunks: refs, Groups: a.runs}, mems)
	if err != nil {
		return publishOutcome{}, clusterError("publish", err)
	}
	results := make([]publishResult, len(a.ids))
	for i := range results {
		results[i] = publishResult{ID: hex.EncodeToString(a.ids[i]), Status: "failed", Holders: []holder{},
			Reason: "the node sent no result for this chunk"}
	}
	for _, r := range res.Results {
		i := int(r.GetIndex())
		if i >= len(results) {
			continue
		}
		holders := make([]holder, 0, len(r.GetHolders()))
		for _, h := range r.GetHolders() {
			holders = append(holders, holder{NodeID: h.GetNodeId(), GRPCAddr: h.GetGrpcAddr()})
		}
		status := putStatus[r.GetStatus()]
		if status == "" {
			status = "failed"
		}
		results[i] = publishResult{ID: results[i].ID, Status: status, Holders: holders, Degraded: r.GetDegraded(),
			Reason: r.GetReason(), Code: r.GetCode()}
	}
	return publishOutcome{epoch: res.Epoch, results: results}, nil
}

// publishResult is one chunk's result in kvring_publish_reply. Code is
// PutChunkResult.code, the gRPC code number that classifies a rejected or
// failed chunk (10 ABORTED: another write of the chunk held it up, to be
// sent again); 0 otherwise. Clients from before it ignore the field.
type publishResult struct {
	ID       string   `json:"id"`
	Status   string   `json:"status"`
	Holders  []holder `json:"holders"`
	Degraded bool     `json:"degraded"`
	Reason   string   `json:"reason"`
	Code     uint32   `json:"code"`
}

// holder is a node holding a published chunk.
type holder struct {
	NodeID   string `json:"node_id"`
	GRPCAddr string `json:"grpc_addr"`
}
