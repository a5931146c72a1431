package resp

import (
	"bufio"
	"bytes"
	"io"
)

// inbuf is a connection's read buffer: bufio.Reader's reading methods, as
// the parser uses them, over a buffer the connection borrows from the
// server's pool while it serves requests (idle.go). Unlike bufio's, its
// buffer can be filled from outside (prime): a connection waiting for its
// next command reads the command's first bytes into a buffer it borrowed
// only once the socket had them, with no second read. Not safe for
// concurrent use.
type inbuf struct {
	buf  []byte
	r, w int // buf[r:w] is buffered
	src  io.Reader
	err  error // the source's last error, returned once
}

func newInbuf(src io.Reader, size int) *inbuf {
	return &inbuf{buf: make([]byte, size), src: src}
}

// reset empties b and makes it read from src.
func (b *inbuf) reset(src io.Reader) {
	b.r, b.w, b.src, b.err = 0, 0, src, nil
}

// prime makes the first n bytes of b.buf, which the caller read into it,
// what b holds; b must be empty.
func (b *inbuf) prime(n int) {
	b.r, b.w = 0, n
}

// Buffered is the number of bytes held.
func (b *inbuf) Buffered() int { return b.w - b.r }

func (b *inbuf) readErr() error {
	err := b.err
	b.err = nil
	return err
}

// fill moves what is held to the front and reads once more from the
// source (a read that returns nothing and no error is retried a few
// times, as bufio's).
func (b *inbuf) fill() {
	if b.r > 0 {
		copy(b.buf, b.buf[b.r:b.w])
		b.w -= b.r
		b.r = 0
	}
	for range 100 {
		n, err := b.src.Read(b.buf[b.w:])
		b.w += n
		if err != nil {
			b.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	b.err = io.ErrNoProgress
}

// ReadByte reads one byte.
func (b *inbuf) ReadByte() (byte, error) {
	for b.r == b.w {
		if b.err != nil {
			return 0, b.readErr()
		}
		b.fill()
	}
	c := b.buf[b.r]
	b.r++
	return c, nil
}

// UnreadByte puts back the byte ReadByte just read.
func (b *inbuf) UnreadByte() error {
	if b.r == 0 {
		return bufio.ErrInvalidUnreadByte
	}
	b.r--
	return nil
}

// Peek returns the next n bytes without consuming them; they are valid
// until the next read. Fewer come with an error (bufio.ErrBufferFull when
// n is larger than the buffer).
func (b *inbuf) Peek(n int) ([]byte, error) {
	for b.w-b.r < n && b.w-b.r < len(b.buf) && b.err == nil {
		b.fill()
	}
	if n > len(b.buf) {
		return b.buf[b.r:b.w], bufio.ErrBufferFull
	}
	if avail := b.w - b.r; avail < n {
		err := b.readErr()
		if err == nil {
			err = bufio.ErrBufferFull
		}
		return b.buf[b.r:b.w], err
	}
	return b.buf[b.r : b.r+n], nil
}

// Discard skips the next n bytes and returns how many it skipped.
func (b *inbuf) Discard(n int) (int, error) {
	done := 0
	for {
		k := min(n-done, b.w-b.r)
		b.r += k
		done += k
		if done == n {
			return done, nil
		}
		if b.err != nil {
			return done, b.readErr()
		}
		b.fill()
	}
}

// Read reads what is held into p, or, when nothing is, reads once from the
// source (straight into p when p is at least as large as the buffer).
func (b *inbuf) Read(p []byte) (int, error) {
	if len(p) == 0 {
		if b.Buffered() > 0 {
			return 0, nil
		}
		return 0, b.readErr()
	}
	if b.r == b.w {
		if b.err != nil {
			return 0, b.readErr()
		}
		if len(p) >= len(b.buf) {
			n, err := b.src.Read(p)
			return n, err
		}
		b.r, b.w = 0, 0
		b.fill()
		if b.r == b.w {
			return 0, b.readErr()
		}
	}
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	return n, nil
}

// ReadSlice reads up to and including delim; the slice is valid until the
// next read. With a full buffer and no delim it returns the buffer and
// bufio.ErrBufferFull; at an error, what it holds and the error.
func (b *inbuf) ReadSlice(delim byte) ([]byte, error) {
	seen := 0
	for {
		if i := bytes.IndexByte(b.buf[b.r+seen:b.w], delim); i >= 0 {
			line := b.buf[b.r : b.r+seen+i+1]
			b.r += seen + i + 1
			return line, nil
		}
		if b.err != nil {
			line := b.buf[b.r:b.w]
			b.r = b.w
			return line, b.readErr()
		}
		if b.Buffered() >= len(b.buf) {
			line := b.buf[b.r:b.w]
			b.r = b.w
			return line, bufio.ErrBufferFull
		}
		seen = b.w - b.r
		b.fill()
	}
}
