package localsock

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/tenant"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// extension returns the handler of a kvring extension message, nil for an
// unknown type.
func extension(typ string) handler {
	switch typ {
	case "kvring_register_namespace_request":
		return (*conn).registerNamespace
	case "kvring_publish_request":
		return (*conn).publish
	case "kvring_lookup_request":
		return (*conn).lookup
	case "kvring_release_lease_request":
		return (*conn).releaseLease
	case "kvring_get_request":
		return (*conn).getChunks
	case "kvring_release_request":
		return (*conn).releaseMany
	}
	return nil
}

func (c *conn) cluster() (Cluster, error) {
	if c.s.cfg.Cluster == nil {
		return nil, errorf(codeNotImplemented, "this node serves no cluster extensions on its socket")
	}
	return c.s.cfg.Cluster, nil
}

func (c *conn) ctx() (context.Context, context.CancelFunc) {
	// The node charges what the call stages or pins to this process.
	ctx, cancel := context.WithTimeout(tenant.Outgoing(tenant.With(context.Background(), c.client)), c.s.cfg.CallTimeout)
	go func() {
		select {
		case <-c.s.done: // the server closes: give up at once
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// clusterError turns an error of the cluster into an error reply.
func clusterError(what string, err error) error {
	var re *replyError
	if errors.As(err, &re) {
		return re
	}
	return errorf(codeUnknownError, "cannot %s: %v", what, err)
}

func (c *conn) registerNamespace(r request) (reply, error) {
	cl, err := c.cluster()
	if err != nil {
		return reply{}, err
	}
	name, _, err := r.str("name")
	if err != nil {
		return reply{}, err
	}
	sch, _, err := r.object("schema")
	if err != nil {
		return reply{}, err
	}
	schema := &kvringv1.NamespaceSchema{}
	str := func(k string) string { s, _ := sch[k].(string); return s }
	num := func(k string) (uint32, error) {
		v, ok := sch[k]
		if !ok {
			return 0, nil
		}
		n, isNum := v.(interface{ String() string })
		u, err := strconv.ParseUint(fmt.Sprint(n), 10, 32)
		if !isNum || err != nil {
			return 0, invalid("kvring_register_namespace_request: schema.%s must be an unsigned integer", k)
		}
		return uint32(u), nil
	}
	schema.Model, schema.Dtype, schema.Layout, schema.HashScheme = str("model"), str("dtype"), str("layout"), str("hash_scheme")
	for k, dst := range map[string]*uint32{"tokens_per_chunk": &schema.TokensPerChunk, "tp_rank": &schema.TpRank,
		"tp_size": &schema.TpSize, "chunks_per_group": &schema.ChunksPerGroup} {
		if *dst, err = num(k); err != nil {
			return reply{}, err
		}
	}
	if extra, ok := sch["extra"].(map[string]any); ok {
		schema.Extra = make(map[string]string, len(extra))
		for k, v := range extra {
			schema.Extra[k] = fmt.Sprint(v)
		}
	}
	rf, _, err := r.optU64("replication_factor")
	if err != nil {
		return reply{}, err
	}
	minR, _, err := r.optU64("min_replicas")
	if err != nil {
		return reply{}, err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := cl.RegisterNamespace(ctx, &kvringv1.RegisterNamespaceRequest{Name: name, Schema: schema,
		ReplicationFactor: uint32(min(rf, 1<<31)), MinReplicas: uint32(min(minR, 1<<31))})
	if err != nil {
		return reply{}, clusterError("register the namespace", err)
	}
	rec := resp.GetNamespace()
	body := ok("kvring_register_namespace_reply")
	body["name"] = rec.GetName()
	body["fingerprint"] = hex.EncodeToString(rec.GetFingerprint())
	body["created"] = resp.GetCreated()
	body["replication_factor"] = rec.GetReplicationFactor()
	body["min_replicas"] = rec.GetMinReplicas()
	body["epoch"] = resp.GetEpoch()
	return reply{body: body}, nil
}

// namespaceRef reads "namespace" and "fingerprint" (hex).
func namespaceRef(r request) (*kvringv1.NamespaceRef, error) {
	name, _, err := r.str("namespace")
	if err != nil {
		return nil, err
	}
	fps, _, err := r.str("fingerprint")
	if err != nil {
		return nil, err
	}
	fp, err := hex.DecodeString(fps)
	if err != nil {
		return nil, invalid("%s: fingerprint must be hex: %v", r.typ, err)
	}
	if name == "" {
		return nil, invalid("%s: field %q is required", r.typ, "namespace")
	}
	return &kvringv1.NamespaceRef{Name: name, Fingerprint: fp}, nil
}

// chunkIDs reads an array of 64-character hex chunk ids.
func chunkIDs(r request, name string) ([][]byte, error) {
	ss, err := r.strs(name)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(ss))
	for i, s := range ss {
		id, err := store.ParseHexID(s)
		if err != nil {
			return nil, invalid("%s: %s[%d]: %v", r.typ, name, i, err)
		}
		out[i] = id[:]
	}
	return out, nil
}

// groupRuns turns per-id group keys into runs; nil keys: no groups.
func groupRuns(keys [][]byte) []*kvringv1.GroupRun {
	var runs []*kvringv1.GroupRun
	for _, k := range keys {
		if n := len(runs); n > 0 && string(runs[n-1].Key) == string(k) {
			runs[n-1].Count++
			continue
		}
		runs = append(runs, &kvringv1.GroupRun{Key: k, Count: 1})
	}
	return runs
}

// groups reads the optional "groups" array: one group key per id.
func groups(r request, n int) ([]*kvringv1.GroupRun, error) {
	if !r.has("groups") {
		return nil, nil
	}
	keys, err := chunkIDs(r, "groups")
	if err != nil {
		return nil, err
	}
	if len(keys) != n {
		return nil, invalid("%s: groups has %d keys for %d ids", r.typ, len(keys), n)
	}
	return groupRuns(keys), nil
}

// consume deletes the blobs of a publish with consume set and drops one
// reference of c to each (the one create_buffer gave it), as del_data and
// release would: a blob whose slot became a chunk lives on as the chunk,
// the others are freed once no connection holds them.
func (c *conn) consume(bs []*blob) {
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range bs {
		if b != nil && c.refs[b.id] > 1 { // the publish holds one more until dropTemp
			t.dropRefs(c, b, 1)
		}
		if b != nil && !b.deleted {
			t.deleteBlob(b)
		}
	}
}

// dropTemp drops one reference to each blob.
func (c *conn) dropTemp(bs []*blob) {
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range bs {
		if b != nil {
			t.dropRefs(c, b, 1)
		}
	}
}

func (c *conn) lookup(r request) (reply, error) {
	ref, err := namespaceRef(r)
	if err != nil {
		return reply{}, err
	}
	ids, err := chunkIDs(r, "ids")
	if err != nil {
		return reply{}, err
	}
	runs, err := groups(r, len(ids))
	if err != nil {
		return reply{}, err
	}
	pin, _, err := r.optU64("pin_ttl_ms")
	if err != nil {
		return reply{}, err
	}
	resp, err := c.runLookup(&kvringv1.LookupRequest{Namespace: ref, Ids: ids, Groups: runs, PinTtlMs: uint32(min(pin, 1<<31))})
	if err != nil {
		return reply{}, err
	}
	body := ok("kvring_lookup_reply")
	body["epoch"] = resp.GetEpoch()
	body["held"] = resp.GetHeld()
	body["lease_id"] = resp.GetLeaseId()
	body["lease_ttl_ms"] = resp.GetLeaseTtlMs()
	return reply{body: body}, nil
}

// runLookup runs a lookup (JSON or binary) and records its lease, released
// when the connection goes. An error is an error reply.
func (c *conn) runLookup(req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	cl, err := c.cluster()
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := cl.Lookup(ctx, req)
	if err != nil {
		return nil, clusterError("look up", err)
	}
	if resp.GetLeaseId() != 0 {
		t := c.s.tab
		t.mu.Lock()
		c.leases[resp.GetLeaseId()] = true
		t.mu.Unlock()
	}
	return resp, nil
}

func (c *conn) releaseLease(r request) (reply, error) {
	cl, err := c.cluster()
	if err != nil {
		return reply{}, err
	}
	lease, err := r.u64("lease_id")
	if err != nil {
		return reply{}, err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	released, err := cl.ReleaseLease(ctx, lease)
	if err != nil {
		return reply{}, clusterError("release the lease", err)
	}
	t := c.s.tab
	t.mu.Lock()
	delete(c.leases, lease)
	t.mu.Unlock()
	body := ok("kvring_release_lease_reply")
	body["released"] = released
	return reply{body: body}, nil
}

// releaseLeases ends the leases of a connection that went away.
func (c *conn) releaseLeases(leases map[uint64]bool) {
	ctx, cancel := context.WithTimeout(context.Background(), c.s.cfg.CallTimeout)
	defer cancel()
	for l := range leases {
		c.s.cfg.Cluster.ReleaseLease(ctx, l)
	}
}

// getChunks hands out cluster chunks as blobs: {namespace, fingerprint,
// ids[], groups[]?} → payloads of the chunks found (each referenced by this
// connection until released) and one result per id: {id, found, blob_id,
// crc32c, reason} (runGet).
func (c *conn) getChunks(r request) (reply, error) {
	ref, err := namespaceRef(r)
	if err != nil {
		return reply{}, err
	}
	ids, err := chunkIDs(r, "ids")
	if err != nil {
		return reply{}, err
	}
	var keys [][]byte
	if r.has("groups") {
		if keys, err = chunkIDs(r, "groups"); err != nil {
			return reply{}, err
		}
	}
	results, bs, err := c.runGet(ref, ids, keys)
	if err != nil {
		return reply{}, err
	}
	rep := c.buffersReply("kvring_get_reply", bs)
	res := make([]any, len(results))
	for i, g := range results {
		m := map[string]any{"id": hex.EncodeToString(ids[i]), "found": g.found, "reason": g.reason}
		if g.found {
			m["crc32c"] = g.crc32c
			m["blob_id"] = g.blobID
		}
		res[i] = m
	}
	rep.body["results"] = res
	return rep, nil
}

// getResult is the outcome of one chunk of a get: found, as the blob
// blobID with its checksum, or not, for reason.
type getResult struct {
	found  bool
	blobID uint64
	crc32c uint32
	reason string
}

// runGet hands out the chunks ids (with their group keys, or nil) of the
// namespace ref as blobs, each referenced by this connection until
// released: one result per id, and the blobs found in order. A chunk this
// node holds is handed out in place (its slot, without a copy or a
// checksum pass: lent, see store.Lend); the others are read from their
// owners into new blobs of this node's memory, verified on arrival. It
// blocks while they are read (bounded by CallTimeout).
func (c *conn) runGet(ref *kvringv1.NamespaceRef, ids, keys [][]byte) ([]getResult, []*blob, error) {
	cl, err := c.cluster()
	if err != nil {
		return nil, nil, err
	}
	if len(ids) == 0 {
		return nil, nil, invalid("kvring_get_request: ids is empty")
	}
	if keys != nil && len(keys) != len(ids) {
		return nil, nil, invalid("kvring_get_request: groups has %d keys for %d ids", len(keys), len(ids))
	}
	results := make([]getResult, len(ids))
	for i := range results {
		results[i].reason = "no answer for this chunk"
	}
	views, remote := c.lendHeld(ref, ids)
	mems := make([]*store.Blob, len(ids))
	if len(remote) > 0 {
		sub := &kvringv1.GetRequest{Namespace: ref}
		var subKeys [][]byte
		for _, i := range remote {
			sub.Ids = append(sub.Ids, ids[i])
			if keys != nil {
				subKeys = append(subKeys, keys[i])
			}
		}
		sub.Groups = groupRuns(subKeys)
		if err := c.fetch(cl, sub, remote, mems, results); err != nil {
			for _, v := range views {
				if v != nil {
					v.Release()
				}
			}
			return nil, nil, err
		}
	}
	return results, c.addGot(views, mems, results), nil
}

// addGot registers the blobs a get found (views lent, mems fetched):
// referenced by this connection, hidden (deleted) so they are freed when
// released; it fills their results and returns them in order.
func (c *conn) addGot(views []*store.View, mems []*store.Blob, results []getResult) []*blob {
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	var bs []*blob
	for i := range results {
		var b *blob
		switch {
		case views[i] != nil:
			b = t.addBlob(c, nil, views[i], views[i].Location().Size, true)
			results[i] = getResult{found: true, crc32c: views[i].Checksum()}
		case mems[i] != nil:
			b = t.addBlob(c, mems[i], nil, mems[i].Size(), true)
		default:
			continue
		}
		b.deleted = true
		results[i].blobID = b.id
		bs = append(bs, b)
	}
	return bs
}

// lendHeld lends the chunks of ids this node holds (views[i]) and returns
// the indexes of the others.
func (c *conn) lendHeld(ref *kvringv1.NamespaceRef, ids [][]byte) (views []*store.View, remote []int) {
	views = make([]*store.View, len(ids))
	ns := namespace.StoreName(ref.GetName(), ref.GetFingerprint())
	for i, raw := range ids {
		id, err := store.ParseID(raw)
		if err == nil {
			views[i], err = c.s.cfg.Store.Lend(ns, id)
		}
		if err != nil {
			views[i] = nil
			remote = append(remote, i)
		}
	}
	return views, remote
}

// fetch reads the chunks of req (at indexes idx of the caller's batch) from
// the cluster into new blobs, mems[idx[k]], and fills their results.
func (c *conn) fetch(cl Cluster, req *kvringv1.GetRequest, idx []int, mems []*store.Blob, results []getResult) error {
	ctx, cancel := c.ctx()
	defer cancel()
	gerr := cl.Get(ctx, req,
		func(k int, size int64) ([]byte, error) {
			m, err := c.s.cfg.Store.CreateBlob(size)
			if err != nil {
				return nil, err
			}
			mems[idx[k]] = m
			return m.Bytes(), nil
		},
		func(k int, h *kvringv1.ChunkHeader, found bool, reason string) {
			i := idx[k]
			if !found && mems[i] != nil {
				mems[i].Free()
				mems[i] = nil
			}
			results[i] = getResult{found: found, reason: reason}
			if found {
				results[i].crc32c = h.GetChunk().GetCrc32C()
			}
		})
	if gerr != nil {
		for i, m := range mems {
			if m != nil {
				m.Free()
				mems[i] = nil
			}
		}
		return clusterError("get chunks", gerr)
	}
	return nil
}

// releaseMany drops one of c's references to each blob of ids (as
// release_request does for one): {ids[]} → {released: how many c held}.
// Ids c holds no reference to are skipped.
func (c *conn) releaseMany(r request) (reply, error) {
	ids, _, err := r.u64s("ids")
	if err != nil {
		return reply{}, err
	}
	body := ok("kvring_release_reply")
	body["released"] = c.releaseIDs(ids)
	return reply{body: body}, nil
}

// releaseIDs drops one of c's references to each blob of ids it holds one
// to and returns how many it dropped.
func (c *conn) releaseIDs(ids []uint64) int {
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, id := range ids {
		if b := t.blobs[id]; b != nil && c.refs[id] > 0 {
			t.dropRefs(c, b, 1)
			n++
		}
	}
	return n
}
