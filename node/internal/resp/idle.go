package resp

import (
	"sync"
)

// Idle connections. LMCache opens up to 150 connections per engine
// process and leaves most of them idle, so a node may hold ten thousand
// that send nothing. While a connection waits for its next command it
// holds no buffer and no goroutine but its own: once its replies are
// flushed (what the client did not take is queued in memory of its own)
// and the socket has no more bytes, its read buffer, its argument buffers
// and its reply buffer go back to the server's pool (Server.bufs), and its
// writing goroutine runs only while replies are queued (writer.loop). It
// waits for its next command in the network poller without a buffer
// (sockIO.readIdle): the buffers are taken from the pool when the socket
// has bytes, which are read straight into the read buffer (inbuf.prime).
// A connection that is not a plain socket (TLS) waits in its read buffer
// and keeps it.

// ioBufs are the buffers a connection uses while it serves a request.
type ioBufs struct {
	br    *inbuf   // read buffer, readBuffer bytes
	buf   []byte   // reader.buf
	spans []span   // reader.spans
	args  [][]byte // reader.args
	out   []byte   // writer.buf
}

// newBufPool returns the pool of ioBufs every connection of a server
// shares.
func newBufPool() *sync.Pool {
	return &sync.Pool{New: func() any {
		return &ioBufs{br: newInbuf(nil, readBuffer), out: make([]byte, 0, 16<<10)}
	}}
}

// maxPooledOut is the largest reply buffer put back in the pool; a larger
// one (a pipeline's many replies) is left to the collector.
const maxPooledOut = 64 << 10

// unpark lends the connection its buffers from the pool, when it holds
// none. For the connection's goroutine.
func (c *conn) unpark() {
	if c.bufs != nil {
		return
	}
	b := c.s.bufs.Get().(*ioBufs)
	b.br.reset(c.rd.raw)
	c.rd.br, c.rd.buf, c.rd.spans, c.rd.args = b.br, b.buf[:0], b.spans[:0], b.args[:0]
	c.w.buf = b.out[:0]
	*b = ioBufs{}
	c.bufs = b
	c.s.bufsHeld.Add(1)
}

// park gives the connection's buffers back to the pool. Only between
// requests, with nothing left in the read buffer and every reply flushed
// (what a reply queued is not in them: flush queues a buffer of its own).
// For the connection's goroutine.
func (c *conn) park() {
	b := c.bufs
	if b == nil {
		return
	}
	c.rd.uncharge() // what the reader held of the client memory goes with its buffers
	clear(c.rd.args[:cap(c.rd.args)])
	b.br, b.buf, b.spans, b.args = c.rd.br, c.rd.buf[:0], c.rd.spans[:0], c.rd.args[:0]
	b.br.reset(nil)
	if cap(c.w.buf) <= maxPooledOut {
		b.out = c.w.buf[:0]
	} else {
		b.out = make([]byte, 0, 16<<10)
	}
	c.rd.br, c.rd.buf, c.rd.spans, c.rd.args, c.w.buf = nil, nil, nil, nil, nil
	c.bufs = nil
	c.s.bufsHeld.Add(-1)
	c.s.bufs.Put(b)
}

// lend lends the connection its buffers, unless it holds them still, and
// returns its read buffer's memory, for sockIO.readIdle to read into.
func (c *conn) lend() []byte {
	c.unpark()
	c.rd.br.reset(c.rd.raw) // empty: waitCommand is called with nothing buffered
	return c.rd.br.buf
}

// canPark reports whether the connection can wait for its next command
// without its read buffer: it is a plain socket.
func (c *conn) canPark() bool { return c.sock != nil }
