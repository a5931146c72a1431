package local

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/internal/sockwire"
)

// The connection's reads and writes. Replies are read through a buffer, so a small
// reply (or several pipelined ones) costs one recvmsg instead of one for
// its length and one for its body. A read may then take in, past a reply,
// the data byte of a descriptor the node passes after it: every read is a
// recvmsg with room for a descriptor, and the kernel returns at most one
// per recvmsg, with the data up to and including its byte, so the
// descriptors queue up (fds) in the order of their bytes in the buffer.

// inBufSize is the read buffer's size: replies up to it are read whole in
// one recvmsg; the rest of a longer one is read straight into its body.
const inBufSize = 16 << 10

// inbox is the bytes read from the connection and not consumed yet
// (buf[r:w]) and the descriptors that came with them, oldest first.
type inbox struct {
	buf  []byte
	r, w int
	fds  []int
	oob  []byte
}

// reset drops what was read of a connection that is gone and closes its
// descriptors.
func (in *inbox) reset() {
	for _, fd := range in.fds {
		unix.Close(fd)
	}
	in.fds, in.r, in.w = nil, 0, 0
}

// fill reads once more into the buffer (moving what is left to its start
// first). mu held.
func (c *Client) fill() error {
	in := &c.in
	if in.buf == nil {
		in.buf, in.oob = make([]byte, inBufSize), make([]byte, unix.CmsgSpace(4*4))
	}
	if in.r > 0 {
		in.w = copy(in.buf, in.buf[in.r:in.w])
		in.r = 0
	}
	n, oobn, flags, _, err := c.nc.ReadMsgUnix(in.buf[in.w:], in.oob)
	n = max(n, 0)
	in.w += n
	if oobn > 0 {
		if perr := in.takeFDs(in.oob[:oobn], flags); perr != nil {
			return perr
		}
	}
	if n == 0 && err == nil {
		err = io.EOF
	}
	if err != nil && n == 0 {
		return err
	}
	return nil
}

// takeFDs queues the descriptors of the control messages oob.
func (in *inbox) takeFDs(oob []byte, flags int) error {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return fmt.Errorf("cannot parse a control message: %w", err)
	}
	for i := range msgs {
		fds, err := unix.ParseUnixRights(&msgs[i])
		if err == nil {
			in.fds = append(in.fds, fds...)
		}
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return fmt.Errorf("a control message was cut short: a descriptor is lost")
	}
	return nil
}

// read reads one reply: an 8-byte little-endian length, then the body,
// returned in a new slice. mu held.
func (c *Client) read() (json.RawMessage, error) {
	in := &c.in
	for in.w-in.r < 8 {
		if err := c.fill(); err != nil {
			return nil, fmt.Errorf("cannot read a reply: %w", err)
		}
	}
	n := binary.LittleEndian.Uint64(in.buf[in.r:])
	if n > 256<<20 {
		return nil, fmt.Errorf("cannot read a reply of %d bytes: too long", n)
	}
	in.r += 8
	for int(n) <= len(in.buf) && in.w-in.r < int(n) {
		if err := c.fill(); err != nil {
			return nil, fmt.Errorf("cannot read a reply: %w", err)
		}
	}
	body := make([]byte, n)
	k := copy(body, in.buf[in.r:in.w])
	in.r += k
	// The rest of a body longer than the buffer: read exactly it, so
	// nothing past the reply (a descriptor's byte) is taken by a plain
	// read.
	if _, err := io.ReadFull(c.nc, body[k:]); err != nil {
		return nil, fmt.Errorf("cannot read a reply: %w", err)
	}
	return body, nil
}

// recvFD receives one descriptor: the data byte the node sends with each
// (SCM_RIGHTS), and the descriptor that came with it. mu held.
func (c *Client) recvFD() (int, error) {
	in := &c.in
	for in.w == in.r {
		if err := c.fill(); err != nil {
			return -1, fmt.Errorf("cannot receive a segment descriptor: %w", err)
		}
	}
	in.r++
	if len(in.fds) == 0 {
		return -1, fmt.Errorf("cannot receive a segment descriptor: its byte came without one")
	}
	fd := in.fds[0]
	in.fds = in.fds[1:]
	return fd, nil
}

// send writes msg: what the socket takes at once, without a deadline, then
// the rest, if any, within Timeout (sockwire.WriteAll). mu held.
func (c *Client) send(msg []byte) error {
	return sockwire.WriteAll(c.nc, msg, c.cfg.Timeout)
}
