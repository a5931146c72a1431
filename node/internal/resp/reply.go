package resp

import (
	"net"
	"strconv"
	"time"
)

// bigReply is the size from which a bulk reply is written from its own
// memory (writev) instead of being copied behind the pending replies.
const bigReply = 16 << 10

// writer buffers replies and writes them to the connection. A reply is
// written in the protocol version the connection chose (HELLO): 2 unless 3.
// Not safe for concurrent use.
type writer struct {
	nc      net.Conn
	timeout time.Duration // for one write; 0: none
	proto   int
	buf     []byte
	limit   int // pending bytes above which the buffer is written out
	err     error
	written int64 // bytes written to the connection
}

func newWriter(nc net.Conn, timeout time.Duration, limit int) *writer {
	return &writer{nc: nc, timeout: timeout, proto: 2, buf: make([]byte, 0, 16<<10), limit: limit}
}

// flush writes the pending replies. Errors stick: once a write failed,
// every later flush returns the error.
func (w *writer) flush() error {
	if w.err != nil || len(w.buf) == 0 {
		return w.err
	}
	w.deadline()
	n, err := w.nc.Write(w.buf)
	w.written += int64(n)
	w.err = err
	w.buf = w.buf[:0]
	if cap(w.buf) > 4*w.limit {
		w.buf = make([]byte, 0, 16<<10)
	}
	return err
}

func (w *writer) deadline() {
	if w.timeout > 0 {
		w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

// maybeFlush writes the pending replies out when there are many of them,
// so a pipeline's replies never queue without bound.
func (w *writer) maybeFlush() {
	if len(w.buf) >= w.limit {
		w.flush()
	}
}

func (w *writer) simple(s string) {
	w.buf = append(append(append(w.buf, '+'), s...), '\r', '\n')
	w.maybeFlush()
}

func (w *writer) ok() { w.simple("OK") }

// error writes an error reply; msg starts with its prefix (ERR, NOAUTH, ...).
func (w *writer) error(msg string) {
	w.buf = append(append(append(w.buf, '-'), msg...), '\r', '\n')
	w.maybeFlush()
}

func (w *writer) int(n int64) {
	w.buf = strconv.AppendInt(append(w.buf, ':'), n, 10)
	w.buf = append(w.buf, '\r', '\n')
	w.maybeFlush()
}

func (w *writer) header(kind byte, n int) {
	w.buf = strconv.AppendInt(append(w.buf, kind), int64(n), 10)
	w.buf = append(w.buf, '\r', '\n')
}

// bulk writes a bulk string; b is only read until bulk returns.
func (w *writer) bulk(b []byte) {
	if len(b) >= bigReply {
		w.bulkDirect(b)
		return
	}
	// Appended in one go, so that a fault while b is read (a segment
	// truncated under a lent chunk) leaves the pending replies as they were.
	out := strconv.AppendInt(append(w.buf, '$'), int64(len(b)), 10)
	out = append(append(append(out, '\r', '\n'), b...), '\r', '\n')
	w.buf = out
	w.maybeFlush()
}

func (w *writer) bulkString(s string) {
	w.header('$', len(s))
	w.buf = append(append(w.buf, s...), '\r', '\n')
	w.maybeFlush()
}

// bulkDirect writes the pending replies, the bulk header, b and the
// trailing CRLF in one writev: b's bytes are copied by the kernel only. b
// is only read until bulkDirect returns.
func (w *writer) bulkDirect(b []byte) {
	w.header('$', len(b))
	if w.err != nil {
		w.buf = w.buf[:0]
		return
	}
	w.deadline()
	bufs := net.Buffers{w.buf, b, crlf}
	n, err := bufs.WriteTo(w.nc)
	w.written += n
	w.err = err
	w.buf = w.buf[:0]
}

var crlf = []byte("\r\n")

// null writes a missing value: $-1 in RESP2, _ in RESP3.
func (w *writer) null() {
	if w.proto == 3 {
		w.buf = append(w.buf, '_', '\r', '\n')
	} else {
		w.buf = append(w.buf, '$', '-', '1', '\r', '\n')
	}
	w.maybeFlush()
}

// array starts an array of n elements.
func (w *writer) array(n int) { w.header('*', n) }

// mapHeader starts a map of n pairs: an array of 2n in RESP2.
func (w *writer) mapHeader(n int) {
	if w.proto == 3 {
		w.header('%', n)
	} else {
		w.header('*', 2*n)
	}
}

// setHeader starts a set of n elements: an array in RESP2.
func (w *writer) setHeader(n int) {
	if w.proto == 3 {
		w.header('~', n)
	} else {
		w.header('*', n)
	}
}

// strings writes an array of bulk strings.
func (w *writer) strings(ss ...string) {
	w.array(len(ss))
	for _, s := range ss {
		w.bulkString(s)
	}
}
