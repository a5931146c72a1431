package localsock

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
)

// conn is one client connection. Its maps are guarded by the table's
// mutex (connection close and other connections' deletes touch them);
// registered and sent belong to the connection's goroutine.
type conn struct {
	s  *Server
	nc *net.UnixConn

	registered bool
	sent       map[uint32]bool // segments whose descriptor this connection was sent
	in         *bufio.Reader   // the requests read and not handled yet
	out        []byte          // replies held back, written with the next (answer)

	refs    map[uint64]int   // blob id → references this connection holds
	created map[uint64]*blob // unsealed blobs it created
	leases  map[uint64]bool  // lookup leases taken through it (released when it goes)
	// client names the process at the other end, for the shares of
	// unsealed blobs and, through the cluster calls, of staged and pinned
	// bytes.
	client string
}

func newConn(s *Server, nc *net.UnixConn) *conn {
	return &conn{s: s, nc: nc, client: s.cfg.clientName(nc, s.seq.Add(1)), sent: make(map[uint32]bool), refs: make(map[uint64]int),
		created: make(map[uint64]*blob), leases: make(map[uint64]bool)}
}

// reply is what a handler answers: the JSON reply and the segments whose
// descriptors follow it, in order.
type reply struct {
	body map[string]any
	raw  json.RawMessage // the reply already encoded, in place of body
	segs []uint32
}

// serve reads requests and answers them in turn until the client goes,
// sends exit_request or a frame that cannot be read, or the server closes.
// Then it releases what the connection held. Replies to requests that
// arrived together (a client that pipelines them) are written together
// (answer).
func (c *conn) serve() {
	defer c.cleanup()
	defer c.flush()
	var buf []byte
	c.in = bufio.NewReaderSize(c.nc, 4<<10) // small requests in one read(2); larger ones are read past it
	for {
		body, err := readFrame(c.nc, c.in, &buf, c.s.cfg.FrameTimeout)
		if err != nil {
			if errors.Is(err, errTooLong) {
				c.writeError(invalid("%v", err))
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.s.log.Debug("local socket connection ended", "err", err)
			}
			return
		}
		if isBinary(body) {
			out, segs := c.handleBinary(body)
			c.shrink(&buf)
			if !c.answer(out, segs) {
				return
			}
			continue
		}
		req, rerr := parseRequest(body)
		c.shrink(&buf)
		if rerr != nil {
			if !c.writeError(rerr) {
				return
			}
			continue
		}
		if req.typ == "exit_request" {
			return
		}
		if !c.serveJSON(req) {
			return
		}
	}
}

// serveJSON answers a JSON request; false when the connection is broken.
func (c *conn) serveJSON(req request) bool {
	rep, herr := c.handle(req)
	if herr != nil {
		return c.writeError(herr)
	}
	var v any = rep.body
	if rep.raw != nil {
		v = rep.raw
	}
	body, err := json.Marshal(v)
	if err != nil {
		c.s.log.Error("BUG: cannot encode a local socket reply; closing the connection", "err", err)
		return false
	}
	return c.answer(body, rep.segs)
}

// maxHeldReplies bounds the replies answer holds back, in bytes.
const maxHeldReplies = 64 << 10

// answer writes a reply body as a frame, then the descriptors of segs. A
// reply is held back while the next request is already read whole (the
// client sent them together), no descriptor is to follow and the replies
// held back are under maxHeldReplies, and written with the replies after
// it: one write for the lot. false when the connection is broken.
func (c *conn) answer(body []byte, segs []uint32) bool {
	c.out = binary.LittleEndian.AppendUint64(c.out, uint64(len(body)))
	c.out = append(c.out, body...)
	if len(segs) == 0 && len(c.out) < maxHeldReplies && c.nextIsRead() {
		return true
	}
	return c.flush() && c.sendSegments(segs)
}

// nextIsRead reports whether the next request is in the read buffer whole.
func (c *conn) nextIsRead() bool {
	if c.in.Buffered() < 8 {
		return false // Peek would block for the rest
	}
	hdr, err := c.in.Peek(8)
	if err != nil {
		return false
	}
	n := binary.LittleEndian.Uint64(hdr)
	return n <= uint64(c.in.Buffered()-8)
}

// flush writes the replies held back, within WriteTimeout; false when the
// connection is broken.
func (c *conn) flush() bool {
	if len(c.out) == 0 {
		return true
	}
	err := writeRaw(c.nc, c.out, c.s.cfg.WriteTimeout)
	if cap(c.out) > 2*maxHeldReplies {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
	return err == nil
}

// shrink drops a large request's buffer rather than keep it.
func (c *conn) shrink(buf *[]byte) {
	if cap(*buf) > 1<<20 {
		*buf = nil
	}
}

// writeError writes an error reply; false when the connection is broken.
func (c *conn) writeError(err error) bool {
	var re *replyError
	if !errors.As(err, &re) {
		re = errorf(codeUnknownError, "%v", err)
	}
	body, merr := json.Marshal(re)
	if merr != nil {
		c.s.log.Error("BUG: cannot encode a local socket error reply; closing the connection", "err", merr)
		return false
	}
	return c.answer(body, nil)
}

// sendSegments passes the descriptors of segs, in order.
func (c *conn) sendSegments(segs []uint32) bool {
	for _, id := range segs {
		f, _, err := c.s.cfg.Store.SegmentFile(id)
		if err != nil {
			c.s.log.Warn("cannot pass a segment to a local client; closing its connection", "segment", id, "err", err)
			return false
		}
		err = sendFD(c.nc, f, c.s.cfg.WriteTimeout)
		f.Close()
		if err != nil {
			return false
		}
	}
	return true
}

// newSegments returns the segments of the payloads whose descriptors this
// connection has not been sent, in payload order, and marks them sent.
func (c *conn) newSegments(bs []*blob) []uint32 {
	var segs []uint32
	for _, b := range bs {
		if b.size == 0 {
			continue
		}
		id := b.location().Segment
		if !c.sent[id] {
			c.sent[id] = true
			segs = append(segs, id)
		}
	}
	return segs
}

// cleanup closes the connection and releases what it held.
func (c *conn) cleanup() {
	c.nc.Close()
	t := c.s.tab
	t.mu.Lock()
	t.forget(c)
	leases := c.leases
	c.leases = nil
	t.mu.Unlock()
	if len(leases) > 0 && c.s.cfg.Cluster != nil {
		c.releaseLeases(leases)
	}
}
