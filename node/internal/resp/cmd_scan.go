package resp

import (
	"context"
	"strconv"
)

// scanPage is the fewest names one SCAN step asks the cluster for: a step
// walks a node's index once, so a small COUNT (Redis's default is 10) would
// make a whole scan quadratic. COUNT is a hint in Redis too.
const scanPage = 1000

// cmdScan answers SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]: the
// keys written through this port, a page at a time, in every namespace the
// connection's token allows. In Redis Cluster mode it lists this node's
// keys only, as Redis Cluster does. As Redis, it may return a key twice
// (once per holder, or around a ring change) and a page may be empty with
// a cursor that is not 0.
func cmdScan(ctx context.Context, c *conn, req *request) {
	cursor, err := strconv.ParseUint(string(req.args[1]), 10, 64)
	if err != nil {
		c.fail("syntax", errorf(prefixErr, "invalid cursor"))
		return
	}
	var match []byte
	count, strings := 10, true
	for i := 2; i < len(req.args); i += 2 {
		if i+1 >= len(req.args) {
			c.fail("syntax", errorf(prefixErr, "syntax error"))
			return
		}
		switch lower(req.args[i]) {
		case "match":
			match = req.args[i+1]
		case "count":
			n, err := strconv.Atoi(string(req.args[i+1]))
			if err != nil || n < 1 {
				c.fail("syntax", errorf(prefixErr, "value is not an integer or out of range"))
				return
			}
			count = n
		case "type":
			strings = lower(req.args[i+1]) == "string"
		default:
			c.fail("syntax", errorf(prefixErr, "syntax error"))
			return
		}
	}
	var names [][]byte
	next := uint64(0)
	if strings {
		if names, next, err = c.s.cfg.Cluster.Scan(ctx, cursor, min(max(count, scanPage), 10*scanPage), c.s.cfg.ClusterMode); err != nil {
			c.failErr(err)
			return
		}
	}
	keep := names[:0]
	for _, n := range names {
		if (match == nil || globMatch(match, n)) && c.access.allows(c.s.cfg.KeyMap.Namespace(n)) {
			keep = append(keep, n)
		}
	}
	c.w.array(2)
	c.w.bulkString(strconv.FormatUint(next, 10))
	c.w.array(len(keep))
	for _, n := range keep {
		c.w.bulk(n)
	}
}
