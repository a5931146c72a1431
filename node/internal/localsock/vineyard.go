package localsock

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kvring/kvring/store"
)

// vineyardVersion is the server version reported to clients.
const vineyardVersion = "0.24.4"

// handler answers one request type.
type handler func(c *conn, r request) (reply, error)

// handlers maps request types to their handlers; built once per call of
// handle (a plain switch would do; the map keeps the table readable).
func (c *conn) handle(r request) (reply, error) {
	if !c.registered && r.typ != "register_request" {
		return reply{}, invalid("%s before register_request: a connection must register first", r.typ)
	}
	var h handler
	switch r.typ {
	case "register_request":
		h = (*conn).register
	case "create_buffer_request":
		h = (*conn).createBuffer
	case "create_buffers_request":
		h = (*conn).createBuffers
	case "seal_request":
		h = (*conn).seal
	case "get_buffers_request":
		h = (*conn).getBuffers
	case "drop_buffer_request":
		h = (*conn).dropBuffer
	case "release_request":
		h = (*conn).release
	case "increase_reference_count_request":
		h = (*conn).increaseRefs
	case "del_data_request":
		h = (*conn).delData
	case "create_data_request":
		h = (*conn).createData
	case "get_data_request":
		h = (*conn).getData
	case "list_data_request":
		h = (*conn).listData
	case "exists_request":
		h = (*conn).exists
	case "persist_request":
		h = (*conn).persist
	case "if_persist_request":
		h = (*conn).ifPersist
	case "put_name_request":
		h = (*conn).putName
	case "get_name_request":
		h = (*conn).getName
	case "drop_name_request":
		h = (*conn).dropName
	case "list_name_request":
		h = (*conn).listName
	case "instance_status_request":
		h = (*conn).instanceStatus
	case "cluster_meta":
		h = (*conn).clusterMeta
	default:
		if x := extension(r.typ); x != nil {
			h = x
			break
		}
		return reply{}, errorf(codeNotImplemented, "%s is not implemented by kvring", r.typ)
	}
	return h(c, r)
}

func ok(typ string) map[string]any { return map[string]any{"type": typ} }

func (c *conn) register(r request) (reply, error) {
	match := true
	if raw, present := r.f["store_type"]; present && !isNull(raw) {
		st, isStr, err := r.str("store_type")
		switch {
		case err == nil && isStr:
			match = st == "Normal"
		default:
			n, isNum := parseU64(raw)
			match = isNum && n == 1
		}
	}
	if _, _, err := r.str("version"); err != nil {
		return reply{}, err
	}
	sid, _, err := r.optU64("session_id")
	if err != nil {
		return reply{}, err
	}
	c.registered = match
	b := ok("register_reply")
	b["ipc_socket"] = c.s.cfg.Path
	b["rpc_endpoint"] = c.s.cfg.RPCEndpoint
	b["instance_id"] = c.s.cfg.InstanceID
	b["session_id"] = sid
	b["version"] = vineyardVersion
	b["store_match"] = match
	b["support_rpc_compression"] = false
	return reply{body: b}, nil
}

// payload describes a blob to the client.
func (c *conn) payload(b *blob) payload {
	if b.size == 0 {
		return payload{ObjectID: b.id, StoreFD: -1, IsSealed: true, IsOwner: true}
	}
	loc := b.location()
	return payload{ObjectID: b.id, StoreFD: int64(loc.Segment), DataOffset: loc.Offset, DataSize: b.size,
		MapSize: loc.MapSize, Pointer: loc.Offset, IsSealed: b.sealed, IsOwner: true}
}

// payload is a blob's payload in a reply (a struct, not a map: a reply of
// many blobs encodes several times faster).
type payload struct {
	ObjectID   uint64 `json:"object_id"`
	StoreFD    int64  `json:"store_fd"`
	DataOffset int64  `json:"data_offset"`
	DataSize   int64  `json:"data_size"`
	MapSize    int64  `json:"map_size"`
	Pointer    int64  `json:"pointer"`
	IsSealed   bool   `json:"is_sealed"`
	IsOwner    bool   `json:"is_owner"`
	IsGPU      bool   `json:"is_gpu"`
}

// emptyBlob is the always-present blob of size 0.
var emptyBlob = &blob{id: emptyBlobID, sealed: true}

// create allocates one blob of size bytes for c.
func (c *conn) create(size uint64) (*blob, error) {
	if size == 0 {
		return emptyBlob, nil
	}
	st := c.s.cfg.Store
	if size > uint64(st.MaxChunkSize()) {
		return nil, errorf(codeNotEnoughMemory, "a blob of %d bytes is larger than the largest this node holds (%d)", size, st.MaxChunkSize())
	}
	// Charged to the client's share of unsealed blobs first: a client
	// that creates blobs and never seals them cannot take the memory.
	t := c.s.tab
	t.mu.Lock()
	err := t.shares.take(c.client, int64(size))
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	mem, err := st.CreateBlob(int64(size))
	if err != nil {
		t.mu.Lock()
		t.shares.give(c.client, int64(size))
		t.mu.Unlock()
		if errors.Is(err, store.ErrNoSpace) || errors.Is(err, store.ErrInvalid) {
			return nil, errorf(codeNotEnoughMemory, "cannot place a blob of %d bytes: %v", size, err)
		}
		return nil, errorf(codeUnknownError, "cannot create a blob of %d bytes: %v", size, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.addBlob(c, mem, nil, int64(size), false)
	b.charged = c.client
	return b, nil
}

// fdOf is the reply's fd field for a blob: its segment when that is passed
// now, else -1.
func fdOf(b *blob, segs []uint32) int64 {
	if b.size == 0 {
		return -1
	}
	seg := b.location().Segment
	for _, s := range segs {
		if s == seg {
			return int64(seg)
		}
	}
	return -1
}

func (c *conn) createBuffer(r request) (reply, error) {
	size, err := r.u64("size")
	if err != nil {
		return reply{}, err
	}
	b, err := c.create(size)
	if err != nil {
		return reply{}, err
	}
	segs := c.newSegments([]*blob{b})
	body := ok("create_buffer_reply")
	body["id"] = b.id
	body["fd"] = fdOf(b, segs)
	body["created"] = c.payload(b)
	return reply{body: body, segs: segs}, nil
}

func (c *conn) createBuffers(r request) (reply, error) {
	num, err := r.u64("num")
	if err != nil {
		return reply{}, err
	}
	sizes, _, err := r.u64s("sizes")
	if err != nil {
		return reply{}, err
	}
	if uint64(len(sizes)) != num {
		return reply{}, invalid("create_buffers_request: num is %d but sizes has %d entries", num, len(sizes))
	}
	bs := make([]*blob, 0, len(sizes))
	for _, size := range sizes {
		b, err := c.create(size)
		if err != nil {
			c.dropCreated(bs)
			return reply{}, err
		}
		bs = append(bs, b)
	}
	segs := c.newSegments(bs)
	body := ok("create_buffers_reply")
	ids := make([]uint64, len(bs))
	payloads := make([]any, len(bs))
	for i, b := range bs {
		ids[i] = b.id
		payloads[i] = c.payload(b)
		body[strconv.Itoa(i)] = payloads[i]
	}
	fds := make([]int64, len(segs))
	for i, s := range segs {
		fds[i] = int64(s)
	}
	body["num"] = len(bs)
	body["ids"] = ids
	body["fds"] = fds
	body["payloads"] = payloads
	return reply{body: body, segs: segs}, nil
}

// dropCreated frees blobs created by a request that failed midway.
func (c *conn) dropCreated(bs []*blob) {
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range bs {
		if b.size == 0 {
			continue
		}
		t.dropRefs(c, b, -1)
		t.deleteBlob(b)
	}
}

// objectID reads the object id of a request from the first of names
// present.
func objectID(r request, names ...string) (uint64, error) {
	for _, n := range names {
		if r.has(n) {
			return r.u64(n)
		}
	}
	return 0, invalid("%s: field %q is required", r.typ, names[0])
}

func (c *conn) seal(r request) (reply, error) {
	id, err := objectID(r, "object_id", "id")
	if err != nil {
		return reply{}, err
	}
	if id == emptyBlobID {
		return reply{body: ok("seal_reply")}, nil
	}
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.lookupBlob(id)
	switch {
	case b == nil:
		return reply{}, errorf(codeObjectNotExists, "seal: blob %s does not exist", objectName(id))
	case b.sealed:
		return reply{}, errorf(codeObjectSealed, "seal: blob %s is already sealed", objectName(id))
	}
	b.sealed = true
	t.unsealed(b)
	return reply{body: ok("seal_reply")}, nil
}

// requestedIDs reads get_buffers' ids: an "ids" array (Go client) or keys
// "0".."num-1" with "num" (C++ client).
func requestedIDs(r request) ([]uint64, error) {
	if ids, present, err := r.u64s("ids"); err != nil || present {
		return ids, err
	}
	num, present, err := r.optU64("num")
	if err != nil {
		return nil, err
	}
	if !present {
		return nil, nil
	}
	return r.indexedU64s(num)
}

func (c *conn) getBuffers(r request) (reply, error) {
	ids, err := requestedIDs(r)
	if err != nil {
		return reply{}, err
	}
	unsafe, err := r.boolean("unsafe")
	if err != nil {
		return reply{}, err
	}
	t := c.s.tab
	t.mu.Lock()
	bs := make([]*blob, 0, len(ids))
	for _, id := range ids {
		if id == emptyBlobID {
			bs = append(bs, emptyBlob)
			continue
		}
		b := t.lookupBlob(id)
		if b == nil {
			continue // unknown ids are left out
		}
		if !b.sealed && !unsafe {
			t.mu.Unlock()
			return reply{}, errorf(codeObjectNotSealed, "get_buffers: blob %s is not sealed (set unsafe to read it anyway)", objectName(id))
		}
		bs = append(bs, b)
	}
	for _, b := range bs {
		if b.size > 0 {
			t.addRef(c, b)
		}
	}
	t.mu.Unlock()
	return c.buffersReply("get_buffers_reply", bs), nil
}

// buffersReply describes bs as get_buffers does.
func (c *conn) buffersReply(typ string, bs []*blob) reply {
	segs := c.newSegments(bs)
	body := ok(typ)
	payloads := make([]any, len(bs))
	for i, b := range bs {
		payloads[i] = c.payload(b)
		body[strconv.Itoa(i)] = payloads[i]
	}
	fds := make([]int64, len(segs))
	for i, s := range segs {
		fds[i] = int64(s)
	}
	body["num"] = len(bs)
	body["payloads"] = payloads
	body["fds"] = fds
	body["compress"] = false
	return reply{body: body, segs: segs}
}

func (c *conn) dropBuffer(r request) (reply, error) {
	id, err := objectID(r, "id", "object_id")
	if err != nil {
		return reply{}, err
	}
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.lookupBlob(id)
	switch {
	case b == nil:
		return reply{}, errorf(codeObjectNotExists, "drop_buffer: blob %s does not exist", objectName(id))
	case b.sealed:
		return reply{}, errorf(codeObjectSealed, "drop_buffer: blob %s is sealed (delete it with del_data)", objectName(id))
	}
	t.dropRefs(c, b, -1)
	t.deleteBlob(b)
	return reply{body: ok("drop_buffer_reply")}, nil
}

func (c *conn) release(r request) (reply, error) {
	id, err := objectID(r, "object_id", "id")
	if err != nil {
		return reply{}, err
	}
	if id == emptyBlobID {
		return reply{body: ok("release_reply")}, nil
	}
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.blobs[id] // a deleted blob may still be released
	if b == nil {
		if t.objs[id] != nil {
			return reply{body: ok("release_reply")}, nil
		}
		return reply{}, errorf(codeObjectNotExists, "release: object %s does not exist", objectName(id))
	}
	t.dropRefs(c, b, 1)
	return reply{body: ok("release_reply")}, nil
}

func (c *conn) increaseRefs(r request) (reply, error) {
	ids, _, err := r.u64s("ids")
	if err != nil {
		return reply{}, err
	}
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if b := t.lookupBlob(id); b != nil {
			t.addRef(c, b)
		}
	}
	return reply{body: ok("increase_reference_count_reply")}, nil
}

func (c *conn) delData(r request) (reply, error) {
	ids, present, err := r.u64s("id")
	if err != nil {
		return reply{}, err
	}
	if !present {
		if !r.has("id") {
			return reply{}, invalid(`del_data_request: field "id" is required`)
		}
	}
	deep, err := r.boolean("deep")
	if err != nil {
		return reply{}, err
	}
	for _, n := range []string{"force", "fastpath", "memory_trim"} {
		if _, err := r.boolean(n); err != nil {
			return reply{}, err
		}
	}
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		t.deleteObject(id, deep, 0)
	}
	return reply{body: ok("del_data_reply")}, nil
}

// deleteObject deletes a blob or a metadata tree (with deep, its members
// too). Unknown ids are ignored. mu held.
func (t *table) deleteObject(id uint64, deep bool, depth int) {
	if isBlobID(id) {
		if b := t.lookupBlob(id); b != nil {
			t.deleteBlob(b)
		}
		return
	}
	o := t.objs[id]
	if o == nil {
		return
	}
	delete(t.objs, id)
	if !deep || depth > 64 {
		return
	}
	for _, m := range members(o.tree) {
		t.deleteObject(m, deep, depth+1)
	}
}

// members returns the ids of the nested objects of a tree (values that are
// objects with an "id" of the form "o%016x").
func members(tree map[string]any) []uint64 {
	var ids []uint64
	for _, v := range tree {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if s, ok := m["id"].(string); ok {
			if id, err := parseObjectName(s); err == nil {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

func parseObjectName(s string) (uint64, error) {
	if len(s) < 2 || s[0] != 'o' {
		return 0, fmt.Errorf("not an object name: %q", s)
	}
	return strconv.ParseUint(s[1:], 16, 64)
}

// nowMS is the time in milliseconds, for __timestamp.
func nowMS() int64 { return time.Now().UnixMilli() }
