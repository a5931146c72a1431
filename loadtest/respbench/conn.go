package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// replyKind is what a server answered to one request.
type replyKind int

const (
	replyOK    replyKind = iota // +OK, or an integer
	replyValue                  // a bulk string, read into the connection's buffer
	replyNil                    // a null bulk string: GET of a key not held
	replyMoved                  // -MOVED slot host:port
	replyError                  // any other error answer
)

// reply is one answer; msg is the error text or the MOVED target.
type reply struct {
	kind replyKind
	n    int
	msg  string
}

// rconn is one connection with one request in flight. Its buffers are its
// own and reused: val holds the last value read until the next request.
type rconn struct {
	nc      net.Conn
	br      *bufio.Reader
	hdr     []byte
	val     []byte
	timeout time.Duration
}

// readBuffer is the connection's bufio buffer: replies' headers and small
// values go through it; a value read of more than this goes to the socket
// straight into val.
const readBuffer = 64 << 10

var crlf = []byte("\r\n")

func dial(addr string, timeout time.Duration) (*rconn, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return &rconn{nc: nc, br: bufio.NewReaderSize(nc, readBuffer), timeout: timeout}, nil
}

// do sends one command (args, then value as its last argument when value
// is not nil) and reads its answer. The caller keeps value; it is written
// with one writev beside the header and not copied.
func (c *rconn) do(value []byte, args ...string) (reply, error) {
	n := len(args)
	if value != nil {
		n++
	}
	c.hdr = append(c.hdr[:0], '*')
	c.hdr = strconv.AppendInt(c.hdr, int64(n), 10)
	c.hdr = append(c.hdr, crlf...)
	for _, a := range args {
		c.hdr = appendBulkHeader(c.hdr, len(a))
		c.hdr = append(append(c.hdr, a...), crlf...)
	}
	if err := c.nc.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return reply{}, err
	}
	bufs := net.Buffers{c.hdr}
	if value != nil {
		c.hdr = appendBulkHeader(c.hdr, len(value))
		bufs = net.Buffers{c.hdr, value, crlf}
	}
	if _, err := bufs.WriteTo(c.nc); err != nil {
		return reply{}, fmt.Errorf("send %s: %w", args[0], err)
	}
	return c.readReply()
}

func appendBulkHeader(b []byte, n int) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, crlf...)
}

// readReply reads one answer; a bulk string's bytes land in c.val.
func (c *rconn) readReply() (reply, error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return reply{}, fmt.Errorf("read answer: %w", err)
	}
	if len(line) < 3 {
		return reply{}, fmt.Errorf("short answer line %q", line)
	}
	text := string(line[1 : len(line)-2])
	switch line[0] {
	case '+', ':':
		return reply{kind: replyOK}, nil
	case '-':
		if rest, ok := strings.CutPrefix(text, "MOVED "); ok {
			return reply{kind: replyMoved, msg: rest}, nil
		}
		return reply{kind: replyError, msg: text}, nil
	case '$':
		return c.readBulk(text)
	}
	return reply{}, fmt.Errorf("unexpected answer %q", line)
}

// readBulk reads a bulk string of the length in text into c.val.
func (c *rconn) readBulk(text string) (reply, error) {
	n, err := strconv.Atoi(text)
	if err != nil {
		return reply{}, fmt.Errorf("bulk length %q: %w", text, err)
	}
	if n < 0 {
		return reply{kind: replyNil}, nil
	}
	if cap(c.val) < n+2 {
		c.val = make([]byte, n+2)
	}
	b := c.val[:n+2]
	if _, err := io.ReadFull(c.br, b); err != nil {
		return reply{}, fmt.Errorf("read %d-byte value: %w", n, err)
	}
	if string(b[n:]) != "\r\n" {
		return reply{}, errors.New("value not followed by CRLF")
	}
	return reply{kind: replyValue, n: n}, nil
}

func (c *rconn) close() { _ = c.nc.Close() }
