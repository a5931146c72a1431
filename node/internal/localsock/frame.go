package localsock

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/internal/sockwire"
)

// errTooLong: a frame's length is over MaxMessageBytes.
var errTooLong = errors.New("message too long")

// readFrame reads one request from in, a buffered reader of c: an 8-byte
// little-endian length, then that many bytes. It waits for the length
// without a deadline (an engine keeps its connection idle between requests)
// and gives the body frameTimeout. The body is read as it arrives, so a
// length the peer never sends costs no memory, into *buf (reused), which
// grows by doubling up to exactly the frame's length: reading a frame of n
// bytes allocates less than 2n in all and holds at most 1.5n at once.
// Reading through in takes one read(2) for a whole small request instead of
// three; it is safe because clients send no descriptors (a plain read would
// drop them).
func readFrame(c *net.UnixConn, in *bufio.Reader, buf *[]byte, frameTimeout time.Duration) ([]byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(in, hdr[:1]); err != nil {
		return nil, err
	}
	if !restBuffered(in, hdr[0]) { // a frame read whole needs no deadline
		c.SetReadDeadline(time.Now().Add(frameTimeout))
		defer c.SetReadDeadline(time.Time{})
	}
	if _, err := io.ReadFull(in, hdr[1:]); err != nil {
		return nil, fmt.Errorf("cannot read a frame's length: %w", err)
	}
	n := binary.LittleEndian.Uint64(hdr[:])
	if n > MaxMessageBytes {
		return nil, fmt.Errorf("%w: a frame of %d bytes, over the limit of %d", errTooLong, n, MaxMessageBytes)
	}
	b := (*buf)[:0]
	for len(b) < int(n) {
		if len(b) == cap(b) {
			next := max(2*cap(b), 64<<10)
			if next >= int(n)/2 {
				next = int(n) // the last step: the frame's exact length
			}
			nb := make([]byte, len(b), next)
			copy(nb, b)
			b = nb
		}
		m, err := in.Read(b[len(b):min(cap(b), int(n))])
		b = b[:len(b)+m]
		if err != nil && len(b) < int(n) {
			*buf = b
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("cannot read a frame of %d bytes (got %d): %w", n, len(b), err)
		}
	}
	*buf = b
	return b, nil
}

// restBuffered reports whether the rest of a frame whose first byte was
// first is in in's buffer: its length's other 7 bytes and its body.
func restBuffered(in *bufio.Reader, first byte) bool {
	if in.Buffered() < 7 {
		return false
	}
	p, err := in.Peek(7)
	if err != nil {
		return false
	}
	var hdr [8]byte
	hdr[0] = first
	copy(hdr[1:], p)
	n := binary.LittleEndian.Uint64(hdr[:])
	return n <= uint64(in.Buffered()-7)
}

// writeFrame writes v as one JSON frame within timeout.
func writeFrame(c *net.UnixConn, v any, timeout time.Duration) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("BUG: cannot encode a reply: %w", err)
	}
	return writeBody(c, body, timeout)
}

// writeBody writes body as one frame within timeout.
func writeBody(c *net.UnixConn, body []byte, timeout time.Duration) error {
	msg := make([]byte, 8+len(body))
	binary.LittleEndian.PutUint64(msg, uint64(len(body)))
	copy(msg[8:], body)
	return writeRaw(c, msg, timeout)
}

// writeRaw writes msg, whole frames, within timeout (sockwire.WriteAll).
func writeRaw(c *net.UnixConn, msg []byte, timeout time.Duration) error {
	if err := sockwire.WriteAll(c, msg, timeout); err != nil {
		return fmt.Errorf("cannot write a reply: %w", err)
	}
	return nil
}

// sendFD passes one descriptor: one data byte with an SCM_RIGHTS message,
// as the Vineyard clients expect (one recvmsg per descriptor).
func sendFD(c *net.UnixConn, f *os.File, timeout time.Duration) error {
	c.SetWriteDeadline(time.Now().Add(timeout))
	defer c.SetWriteDeadline(time.Time{})
	if _, _, err := c.WriteMsgUnix([]byte{0}, unix.UnixRights(int(f.Fd())), nil); err != nil {
		return fmt.Errorf("cannot pass a segment descriptor: %w", err)
	}
	return nil
}
