package localsock

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"time"
)

func (c *conn) createData(r request) (reply, error) {
	tree, present, err := r.object("content")
	if err != nil {
		return reply{}, err
	}
	if !present {
		return reply{}, invalid(`create_data_request: field "content" is required`)
	}
	typename, _ := tree["typename"].(string)
	switch {
	case typename == "":
		return reply{}, errorf(codeUserInputError, `create_data_request: the content needs a string "typename"`)
	case typename == "vineyard::Blob":
		return reply{}, errorf(codeUserInputError, "create_data_request: blobs are created with create_buffer, not create_data")
	}
	if _, ok := tree["instance_id"]; !ok {
		return reply{}, errorf(codeUserInputError, `create_data_request: the content needs "instance_id"`)
	}
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	id := t.nextObj
	t.nextObj++
	sig := id
	tree["id"] = objectName(id)
	tree["signature"] = sig
	tree["__timestamp"] = nowMS()
	tree["transient"] = true
	t.objs[id] = &metaObject{id: id, tree: tree, typename: typename}
	body := ok("create_data_reply")
	body["id"] = id
	body["signature"] = sig
	body["instance_id"] = c.s.cfg.InstanceID
	return reply{body: body}, nil
}

// blobTree is the metadata Vineyard synthesises for a blob.
func (c *conn) blobTree(b *blob) map[string]any {
	return map[string]any{"id": objectName(b.id), "typename": "vineyard::Blob", "length": b.size,
		"nbytes": b.size, "instance_id": c.s.cfg.InstanceID, "transient": true}
}

// treeOf returns the metadata of a visible object; nil if there is none.
// mu held.
func (c *conn) treeOf(id uint64) map[string]any {
	t := c.s.tab
	if id == emptyBlobID {
		return c.blobTree(emptyBlob)
	}
	if isBlobID(id) {
		if b := t.lookupBlob(id); b != nil && b.sealed {
			return c.blobTree(b)
		}
		return nil
	}
	if o := t.objs[id]; o != nil {
		return o.tree
	}
	return nil
}

func (c *conn) getData(r request) (reply, error) {
	ids, _, err := r.u64s("id")
	if err != nil {
		return reply{}, err
	}
	for _, n := range []string{"sync_remote", "wait"} {
		if _, err := r.boolean(n); err != nil {
			return reply{}, err
		}
	}
	t := c.s.tab
	t.mu.Lock()
	content := make(map[string]any, len(ids))
	for _, id := range ids {
		if tree := c.treeOf(id); tree != nil {
			content[objectName(id)] = tree
		}
	}
	body := ok("get_data_reply")
	body["content"] = content
	// Encode under the lock: trees are shared maps.
	enc, err := json.Marshal(body)
	t.mu.Unlock()
	if err != nil {
		return reply{}, fmt.Errorf("BUG: cannot encode metadata: %w", err)
	}
	return reply{raw: enc}, nil
}

// matcher compiles a list request's pattern: a glob, or a regular
// expression when regex is set; "" matches everything.
func matcher(r request) (func(string) bool, int, error) {
	pattern, _, err := r.str("pattern")
	if err != nil {
		return nil, 0, err
	}
	isRegex, err := r.boolean("regex")
	if err != nil {
		return nil, 0, err
	}
	limit, present, err := r.optU64("limit")
	if err != nil {
		return nil, 0, err
	}
	if !present || limit > 1<<20 {
		limit = 1 << 20
	}
	switch {
	case pattern == "" || pattern == "*":
		return func(string) bool { return true }, int(limit), nil
	case isRegex:
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, 0, errorf(codeUserInputError, "%s: pattern %q is not a regular expression: %v", r.typ, pattern, err)
		}
		return re.MatchString, int(limit), nil
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, 0, errorf(codeUserInputError, "%s: pattern %q is not a glob: %v", r.typ, pattern, err)
	}
	return func(s string) bool { m, _ := path.Match(pattern, s); return m }, int(limit), nil
}

// listData answers list_data_request with a get_data_reply, as vineyardd
// does: the objects whose typename matches, sealed blobs under
// "vineyard::Blob".
func (c *conn) listData(r request) (reply, error) {
	match, limit, err := matcher(r)
	if err != nil {
		return reply{}, err
	}
	t := c.s.tab
	t.mu.Lock()
	content := make(map[string]any)
	if match("vineyard::Blob") {
		for _, b := range sortedBlobs(t) {
			if len(content) >= limit {
				break
			}
			content[objectName(b.id)] = c.blobTree(b)
		}
	}
	for _, o := range t.objs {
		if len(content) >= limit {
			break
		}
		if match(o.typename) {
			content[objectName(o.id)] = o.tree
		}
	}
	body := ok("get_data_reply")
	body["content"] = content
	enc, err := json.Marshal(body)
	t.mu.Unlock()
	if err != nil {
		return reply{}, fmt.Errorf("BUG: cannot encode metadata: %w", err)
	}
	return reply{raw: enc}, nil
}

// sortedBlobs lists the visible sealed blobs by id. mu held.
func sortedBlobs(t *table) []*blob {
	var bs []*blob
	for _, b := range t.blobs {
		if !b.deleted && b.sealed {
			bs = append(bs, b)
		}
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].id < bs[j].id })
	return bs
}

func (c *conn) exists(r request) (reply, error) {
	id, err := r.u64("id")
	if err != nil {
		return reply{}, err
	}
	t := c.s.tab
	t.mu.Lock()
	found := id == emptyBlobID || t.lookupBlob(id) != nil || t.objs[id] != nil
	t.mu.Unlock()
	body := ok("exists_reply")
	body["exists"] = found
	return reply{body: body}, nil
}

func (c *conn) persist(r request) (reply, error) {
	id, err := r.u64("id")
	if err != nil {
		return reply{}, err
	}
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	if isBlobID(id) {
		if id != emptyBlobID && t.lookupBlob(id) == nil {
			return reply{}, errorf(codeObjectNotExists, "persist: object %s does not exist", objectName(id))
		}
		return reply{}, errorf(codeAssertionFailed, "persist: %s is a blob; blobs cannot be persisted", objectName(id))
	}
	o := t.objs[id]
	if o == nil {
		return reply{}, errorf(codeObjectNotExists, "persist: object %s does not exist", objectName(id))
	}
	o.persist = true
	o.tree["transient"] = false
	return reply{body: ok("persist_reply")}, nil
}

func (c *conn) ifPersist(r request) (reply, error) {
	id, err := r.u64("id")
	if err != nil {
		return reply{}, err
	}
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	persisted := false
	switch o := t.objs[id]; {
	case o != nil:
		persisted = o.persist
	case id == emptyBlobID || (isBlobID(id) && t.lookupBlob(id) != nil):
	default:
		return reply{}, errorf(codeObjectNotExists, "if_persist: object %s does not exist", objectName(id))
	}
	body := ok("if_persist_reply")
	body["persist"] = persisted
	return reply{body: body}, nil
}

func (c *conn) putName(r request) (reply, error) {
	id, err := objectID(r, "object_id", "id")
	if err != nil {
		return reply{}, err
	}
	name, present, err := r.str("name")
	if err != nil {
		return reply{}, err
	}
	if !present || name == "" {
		return reply{}, invalid(`put_name_request: field "name" is required`)
	}
	t := c.s.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	if isBlobID(id) {
		return reply{}, errorf(codeObjectIsBlob, "put_name: %s is a blob; only persisted metadata objects are named", objectName(id))
	}
	o := t.objs[id]
	switch {
	case o == nil:
		return reply{}, errorf(codeObjectNotExists, "put_name: object %s does not exist", objectName(id))
	case !o.persist:
		return reply{}, errorf(codeAssertionFailed, "put_name: object %s is not persisted (persist it first)", objectName(id))
	}
	t.names[name] = id
	close(t.namesChanged)
	t.namesChanged = make(chan struct{})
	return reply{body: ok("put_name_reply")}, nil
}

func (c *conn) getName(r request) (reply, error) {
	name, present, err := r.str("name")
	if err != nil {
		return reply{}, err
	}
	if !present {
		return reply{}, invalid(`get_name_request: field "name" is required`)
	}
	wait, err := r.boolean("wait")
	if err != nil {
		return reply{}, err
	}
	t := c.s.tab
	timer := (*time.Timer)(nil)
	for {
		t.mu.Lock()
		id, found := t.names[name]
		changed := t.namesChanged
		t.mu.Unlock()
		if found {
			body := ok("get_name_reply")
			body["object_id"] = id
			return reply{body: body}, nil
		}
		if !wait {
			return reply{}, errorf(codeObjectNotExists, "get_name: no object is named %q", name)
		}
		if timer == nil {
			timer = time.NewTimer(c.s.cfg.NameWait)
			defer timer.Stop()
		}
		select {
		case <-changed:
		case <-timer.C:
			return reply{}, errorf(codeObjectNotExists, "get_name: no object was named %q within %v", name, c.s.cfg.NameWait)
		case <-c.s.done:
			return reply{}, errorf(codeObjectNotExists, "get_name: the node is shutting down")
		}
	}
}

func (c *conn) dropName(r request) (reply, error) {
	name, present, err := r.str("name")
	if err != nil {
		return reply{}, err
	}
	if !present {
		return reply{}, invalid(`drop_name_request: field "name" is required`)
	}
	t := c.s.tab
	t.mu.Lock()
	delete(t.names, name)
	t.mu.Unlock()
	return reply{body: ok("drop_name_reply")}, nil
}

func (c *conn) listName(r request) (reply, error) {
	match, limit, err := matcher(r)
	if err != nil {
		return reply{}, err
	}
	t := c.s.tab
	t.mu.Lock()
	names := make(map[string]uint64)
	for n, id := range t.names {
		if len(names) >= limit {
			break
		}
		if match(n) {
			names[n] = id
		}
	}
	t.mu.Unlock()
	body := ok("list_name_reply")
	body["size"] = len(names)
	body["names"] = names
	return reply{body: body}, nil
}

func (c *conn) instanceStatus(request) (reply, error) {
	st := c.s.cfg.Store.Stats()
	body := ok("instance_status_reply")
	body["meta"] = map[string]any{"instance_id": c.s.cfg.InstanceID, "deployment": "local",
		"memory_usage": st.UsedBytes, "memory_limit": st.LimitBytes, "deferred_requests": 0,
		"ipc_connections": c.s.Connections(), "rpc_connections": 0}
	return reply{body: body}, nil
}

func (c *conn) clusterMeta(request) (reply, error) {
	cfg := &c.s.cfg
	body := ok("cluster_meta")
	body["meta"] = map[string]any{fmt.Sprintf("i%d", cfg.InstanceID): map[string]any{
		"hostid": fmt.Sprint(cfg.InstanceID), "hostname": cfg.NodeName, "nodename": cfg.NodeName,
		"rpc_endpoint": cfg.RPCEndpoint, "rdma_endpoint": "", "ipc_socket": cfg.Path,
		"timestamp": nowMS()}}
	return reply{body: body}, nil
}
