package resp

import (
	"context"
	"strconv"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

const alreadyHeld = kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD

// setOpts are SET's options. EX, PX, EXAT, PXAT and KEEPTTL are accepted
// and change nothing: values do not expire, they live until evicted.
type setOpts struct{ nx, xx, get bool }

func parseSetOpts(args [][]byte) (setOpts, bool) {
	var o setOpts
	for i := 0; i < len(args); i++ {
		switch lower(args[i]) {
		case "nx":
			o.nx = true
		case "xx":
			o.xx = true
		case "get":
			o.get = true
		case "keepttl":
		case "ex", "px", "exat", "pxat":
			if i+1 >= len(args) {
				return o, false
			}
			if n, err := strconv.ParseInt(string(args[i+1]), 10, 64); err != nil || n <= 0 {
				return o, false
			}
			i++
		default:
			return o, false
		}
	}
	return o, !(o.nx && o.xx)
}

// cmdSet answers SET key value [NX|XX] [GET] [EX s|PX ms|...]. Values are
// immutable, as chunks are: SET of a key that exists with the same bytes
// answers +OK and writes nothing, with other bytes an error (the first
// value stays). +OK only once the value is sealed on at least the
// namespace's minimum number of holders; otherwise an error reply says why
// (OOM, TRYAGAIN, ERR).
func cmdSet(ctx context.Context, c *conn, req *request) {
	o, ok := parseSetOpts(req.args[3:])
	if !ok {
		c.fail("syntax", errorf(prefixErr, "syntax error"))
		return
	}
	groups, ok := c.mapKeys(req.args[1:2])
	if !ok {
		return
	}
	if o.nx || o.xx || o.get {
		c.setConditional(ctx, req, groups, o)
		return
	}
	res, errs := c.publish(ctx, groups, 1, req.values)
	if errs[0] == nil && stored(res[0]) {
		c.w.ok()
		return
	}
	c.failWrite(res[0], errs[0])
}

// setConditional is SET with NX, XX or GET: the key's presence decides.
func (c *conn) setConditional(ctx context.Context, req *request, groups []*nsKeys, o setOpts) {
	var old []byte
	found := false
	if o.get { // the kept value is the reply
		read, _ := c.readKeys(ctx, req.args[1:2])
		if err := read(func(_ int, data []byte, release func(), _ error) {
			if data != nil {
				found, old = true, append([]byte(nil), data...)
			}
			let(release)
		}); err != nil {
			c.failErr(err)
			return
		}
	} else { // NX, XX: whether it exists is enough
		rg, ok := c.readGroups(ctx, req.args[1:2])
		if !ok {
			return
		}
		h, err := c.held(ctx, rg, 1)
		if err != nil {
			c.failErr(err)
			return
		}
		found = h[0]
	}
	if found && o.xx && !o.get { // the value must be the one held: the write says so
		res, errs := c.publish(ctx, groups, 1, req.values)
		if errs[0] != nil || !stored(res[0]) {
			c.failWrite(res[0], errs[0])
			return
		}
		c.w.ok()
		return
	}
	if found || o.xx { // nothing to write: the first value stays
		switch {
		case o.get && found:
			c.w.bulk(old)
		default:
			c.w.null()
		}
		return
	}
	res, errs := c.publish(ctx, groups, 1, req.values)
	switch {
	case errs[0] != nil || !stored(res[0]):
		c.failWrite(res[0], errs[0])
	case o.nx && !o.get && res[0].GetStatus() == alreadyHeld: // another writer was first
		c.w.null()
	case o.get:
		c.w.null()
	default:
		c.w.ok()
	}
}

// cmdSetNX answers SETNX key value: 1 when this call stored the value, 0
// when the key existed.
func cmdSetNX(ctx context.Context, c *conn, req *request) {
	groups, ok := c.readGroups(ctx, req.args[1:2])
	if !ok {
		return
	}
	h, err := c.held(ctx, groups, 1)
	if err != nil {
		c.failErr(err)
		return
	}
	if h[0] {
		c.w.int(0)
		return
	}
	res, errs := c.publish(ctx, groups, 1, req.values)
	switch {
	case errs[0] != nil || !stored(res[0]):
		c.failWrite(res[0], errs[0])
	case res[0].GetStatus() == alreadyHeld:
		c.w.int(0)
	default:
		c.w.int(1)
	}
}

// cmdMSet answers MSET key value [key value ...]: +OK when every value is
// held; otherwise an error naming how many were not and why the first was
// not. Unlike Redis's, it is not atomic: the values that were stored stay.
func cmdMSet(ctx context.Context, c *conn, req *request) {
	keys, groups, ok := c.pairKeys(req)
	if !ok {
		return
	}
	c.msetKeys(ctx, groups, len(keys), req.values)
}

// pairKeys checks the key-value pairs of MSET and MSETNX and maps their
// keys; on failure it wrote the error reply.
func (c *conn) pairKeys(req *request) ([][]byte, []*nsKeys, bool) {
	if len(req.args)%2 != 1 {
		c.fail("arity", errorf(prefixErr, "wrong number of arguments for '%s' command", req.name))
		return nil, nil, false
	}
	keys := make([][]byte, 0, len(req.args)/2)
	for i := 1; i < len(req.args); i += 2 {
		keys = append(keys, req.args[i])
	}
	groups, ok := c.mapKeys(keys)
	return keys, groups, ok
}

// msetKeys writes values and replies +OK or the error of the first failure.
func (c *conn) msetKeys(ctx context.Context, groups []*nsKeys, n int, vals []argValue) {
	res, errs := c.publish(ctx, groups, n, vals)
	failed, first := 0, -1
	for i := range n {
		if errs[i] != nil || !stored(res[i]) {
			failed++
			if first < 0 {
				first = i
			}
		}
	}
	if failed == 0 {
		c.w.ok()
		return
	}
	if failed > 1 { // the reason is the first failure's
		var msg, reason string
		if errs[first] != nil {
			msg, reason = errorReply(errs[first])
		} else {
			msg, reason = resultReply(res[first])
		}
		c.fail(reason, msg+" ("+strconv.Itoa(failed)+" of "+strconv.Itoa(n)+" values not stored)")
		return
	}
	c.failWrite(res[first], errs[first])
}

// cmdMSetNX answers MSETNX: 1 when no key existed and every value was
// stored, 0 when some key existed (then nothing is written).
func cmdMSetNX(ctx context.Context, c *conn, req *request) {
	keys, groups, ok := c.pairKeys(req)
	if !ok {
		return
	}
	if err := c.resolve(ctx, groups, false); err != nil {
		c.failErr(err)
		return
	}
	h, err := c.held(ctx, groups, len(keys))
	if err != nil {
		c.failErr(err)
		return
	}
	for _, x := range h {
		if x {
			c.w.int(0)
			return
		}
	}
	res, errs := c.publish(ctx, groups, len(keys), req.values)
	for i := range keys {
		if errs[i] != nil || !stored(res[i]) {
			c.failWrite(res[i], errs[i])
			return
		}
	}
	c.w.int(1)
}

// cmdGet answers GET key: the value, verified against its checksum, or nil
// when no member that may hold it does, or an error (-TRYAGAIN) when one
// that may did not answer.
// GETs pipelined behind it are read with it (pipelinedGets).
func cmdGet(ctx context.Context, c *conn, req *request) {
	if !c.s.cfg.ClusterMode && !req.inline && c.rd.br.Buffered() > 0 {
		if _, _, ok := c.rd.peekGet(); ok {
			c.pipelinedGets(ctx, req)
			return
		}
	}
	getKey(ctx, c, req.args[1])
}

// getKey answers a GET of key: in place when this node holds it
// (getHeld), otherwise through readKeys.
func getKey(ctx context.Context, c *conn, key []byte) {
	if c.getHeld(ctx, key) {
		return
	}
	read, ok := c.readKeys(ctx, [][]byte{key})
	if !ok {
		return
	}
	read(func(_ int, data []byte, release func(), err error) {
		switch {
		case err != nil: // a holder may not have answered: never nil
			c.failErr(err)
		case data == nil:
			c.w.null()
		default:
			c.w.bulkOwned(data, release)
		}
	})
}

// cmdMGet answers MGET key [key ...]: each value or nil, in order; an
// error reply instead when a key could not be read (a member that may hold
// it did not answer): never nil for it. Keys this node holds are read in
// place; runs of the rest cost one cluster read each (one round trip per
// owner). The values are gathered before the reply is written, since
// clients take an error only in place of the whole reply.
func cmdMGet(ctx context.Context, c *conn, req *request) {
	read, ok := c.readKeys(ctx, req.args[1:])
	if !ok {
		return
	}
	type value struct {
		data    []byte
		release func()
	}
	vals := make([]value, 0, len(req.args)-1)
	var failed error
	read(func(_ int, data []byte, release func(), err error) {
		if err != nil && failed == nil {
			failed = err
		}
		if data != nil && release == nil { // valid only during the call
			data, release = append([]byte(nil), data...), owned
		}
		vals = append(vals, value{data, release})
	})
	if failed != nil {
		for _, v := range vals {
			let(v.release)
		}
		c.failErr(failed)
		return
	}
	c.w.array(len(vals))
	for _, v := range vals {
		if v.data == nil {
			c.w.null()
		} else {
			c.w.bulkOwned(v.data, v.release)
		}
	}
}

// cmdStrlen answers STRLEN key: the value's length, 0 when it is missing.
func cmdStrlen(ctx context.Context, c *conn, req *request) {
	read, ok := c.readKeys(ctx, req.args[1:2])
	if !ok {
		return
	}
	n := 0
	if err := read(func(_ int, data []byte, release func(), _ error) { n = len(data); let(release) }); err != nil {
		c.failErr(err)
		return
	}
	c.w.int(int64(n))
}

// cmdGetRange answers GETRANGE key start end (inclusive; negative counts
// from the end), as Redis does.
func cmdGetRange(ctx context.Context, c *conn, req *request) {
	start, err1 := strconv.ParseInt(string(req.args[2]), 10, 64)
	end, err2 := strconv.ParseInt(string(req.args[3]), 10, 64)
	if err1 != nil || err2 != nil {
		c.fail("syntax", errorf(prefixErr, "value is not an integer or out of range"))
		return
	}
	read, ok := c.readKeys(ctx, req.args[1:2])
	if !ok {
		return
	}
	read(func(_ int, data []byte, release func(), err error) {
		switch {
		case err != nil:
			c.failErr(err)
		case data == nil:
			c.w.bulkString("")
		default:
			c.w.bulk(byteRange(data, start, end))
			let(release)
		}
	})
}

// byteRange is Redis's GETRANGE of data.
func byteRange(data []byte, start, end int64) []byte {
	n := int64(len(data))
	if start < 0 && end < 0 && start > end {
		return nil
	}
	if start < 0 {
		start = max(0, n+start)
	}
	if end < 0 {
		end = max(0, n+end)
	}
	end = min(end, n-1)
	if start > end || n == 0 {
		return nil
	}
	return data[start : end+1]
}
