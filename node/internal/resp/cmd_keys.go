package resp

import (
	"context"
	"strings"
)

// cmdExists answers EXISTS key [key ...]: how many of the keys (counted
// with repeats, as Redis does) a GET can return now.
func cmdExists(ctx context.Context, c *conn, req *request) {
	groups, ok := c.readGroups(ctx, req.args[1:])
	if !ok {
		return
	}
	h, err := c.held(ctx, groups, len(req.args)-1)
	for _, g := range groups {
		if !g.known {
			continue
		}
		for _, k := range g.keys {
			c.s.ns.read(g.name, readResult(err == nil && h[k.at], err))
		}
	}
	if err != nil {
		c.failErr(err)
		return
	}
	n := 0
	for _, x := range h {
		c.s.m.read(x)
		if x {
			n++
		}
	}
	c.w.int(int64(n))
}

// cmdDel answers DEL and UNLINK: the keys are removed from every member
// that holds them; the reply counts the distinct keys some member held.
func cmdDel(ctx context.Context, c *conn, req *request) {
	groups, ok := c.readGroups(ctx, req.args[1:])
	if !ok {
		return
	}
	n := 0
	for _, g := range groups {
		if !g.known {
			continue
		}
		seen := map[Key]bool{}
		var keys []Key
		for _, k := range g.keys {
			if !seen[k.Key] {
				seen[k.Key] = true
				keys = append(keys, k.Key)
			}
		}
		held, err := c.s.cfg.Cluster.Delete(ctx, g.ns, keys)
		if err != nil {
			c.failErr(err)
			return
		}
		for _, h := range held {
			if h {
				n++
			}
		}
	}
	c.w.int(int64(n))
}

// cmdType answers TYPE key: "string" for a key a GET can return, else
// "none".
func cmdType(ctx context.Context, c *conn, req *request) {
	h, ok := c.exists1(ctx, req.args[1])
	if !ok {
		return
	}
	if h {
		c.w.simple("string")
	} else {
		c.w.simple("none")
	}
}

// cmdTTL answers TTL and PTTL: -1 (no expiry: values live until evicted)
// for a key a GET can return, else -2.
func cmdTTL(ctx context.Context, c *conn, req *request) {
	h, ok := c.exists1(ctx, req.args[1])
	if !ok {
		return
	}
	if h {
		c.w.int(-1)
	} else {
		c.w.int(-2)
	}
}

// exists1 reports whether one key can be read now; on failure it wrote the
// error reply.
func (c *conn) exists1(ctx context.Context, key []byte) (held, ok bool) {
	groups, ok := c.readGroups(ctx, [][]byte{key})
	if !ok {
		return false, false
	}
	h, err := c.held(ctx, groups, 1)
	if err != nil {
		c.failErr(err)
		return false, false
	}
	return h[0], true
}

// readGroups maps raw keys and looks their namespaces up without creating
// any; on failure it wrote the error reply.
func (c *conn) readGroups(ctx context.Context, raw [][]byte) ([]*nsKeys, bool) {
	groups, ok := c.mapKeys(raw)
	if !ok {
		return nil, false
	}
	if err := c.resolve(ctx, groups, false); err != nil {
		c.failErr(err)
		return nil, false
	}
	return groups, true
}

// cmdDBSize answers DBSIZE: the values this node holds (in Redis Cluster,
// too, DBSIZE counts one node's keys). A value held by R members counts on
// each of them.
func cmdDBSize(_ context.Context, c *conn, _ *request) {
	c.w.int(c.s.localKeys())
}

// localKeys counts the chunks of RESP namespaces this node holds.
func (s *Server) localKeys() int64 {
	var n int64
	for _, u := range s.cfg.Store.Namespaces() {
		if strings.HasPrefix(u.Namespace, NamespacePrefix) {
			n += u.Chunks
		}
	}
	return n
}
