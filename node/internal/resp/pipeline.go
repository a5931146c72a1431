package resp

import (
	"bytes"
	"context"
	"strconv"
)

// maxGetBatch is the most pipelined GETs served as one read.
const maxGetBatch = 256

// peekGet returns the key of the next request when it is a GET that the
// read buffer holds whole (in multibulk form), and the bytes it takes; ok is
// false otherwise (nothing is consumed either way).
func (rd *reader) peekGet() (key []byte, n int, ok bool) {
	buf, _ := rd.br.Peek(rd.br.Buffered())
	const head = "*2\r\n$3\r\n"
	if len(buf) < len(head)+5 || string(buf[:len(head)]) != head || !bytes.EqualFold(buf[len(head):len(head)+3], []byte("GET")) ||
		string(buf[len(head)+3:len(head)+5]) != "\r\n" {
		return nil, 0, false
	}
	rest := buf[len(head)+5:]
	if len(rest) < 1 || rest[0] != '$' {
		return nil, 0, false
	}
	end := bytes.Index(rest, []byte("\r\n"))
	if end < 0 || end > 12 {
		return nil, 0, false
	}
	size, err := strconv.Atoi(string(rest[1:end]))
	if err != nil || size < 0 || size > rd.lim.maxArgLen || len(rest) < end+2+size+2 {
		return nil, 0, false
	}
	body := rest[end+2:]
	if string(body[size:size+2]) != "\r\n" {
		return nil, 0, false
	}
	return body[:size], len(head) + 5 + end + 2 + size + 2, true
}

// pipelinedGets serves a GET and the GETs the client pipelined behind it
// (those already read in whole) as one read of all their keys: keys other
// nodes hold cost one round trip per owner for the batch, not one per GET.
// Each GET still gets its own reply, in order. Only outside Redis Cluster
// mode, where every GET might go through the cluster.
func (c *conn) pipelinedGets(ctx context.Context, first *request) {
	keys := [][]byte{append([]byte(nil), first.args[1]...)}
	for len(keys) < maxGetBatch {
		k, n, ok := c.rd.peekGet()
		if !ok {
			break
		}
		keys = append(keys, append([]byte(nil), k...))
		c.rd.br.Discard(n)
		c.s.m.command("get")
	}
	for _, k := range keys {
		if !c.access.allows(c.namespaceOf(k)) { // each GET on its own, with its own NOPERM
			for _, k := range keys {
				getKey(ctx, c, k)
			}
			return
		}
	}
	read, _ := c.readKeys(ctx, keys)
	read(func(_ int, data []byte, release func(), err error) {
		switch {
		case err != nil: // a holder may not have answered: an error, never nil
			c.failErr(err)
		case data == nil:
			c.w.null()
		default:
			c.w.bulkOwned(data, release)
		}
	})
}
