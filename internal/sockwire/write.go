package sockwire

import (
	"errors"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// WriteAll writes msg on c, the one write both ends of the socket make: what
// the socket takes at once without a deadline (setting one costs as much as
// a small write, and a deadline added after one was cleared wakes the Go
// runtime's sleeping network-poller thread), then the rest, if any, within
// timeout. It blocks only for that rest; msg is the caller's and only read.
func WriteAll(c *net.UnixConn, msg []byte, timeout time.Duration) error {
	n, err := writeNow(c, msg)
	if err != nil || n == len(msg) {
		return err
	}
	c.SetWriteDeadline(time.Now().Add(timeout))
	defer c.SetWriteDeadline(time.Time{})
	_, err = c.Write(msg[n:])
	return err
}

// writeNow writes what of msg the socket takes without waiting and returns
// how many bytes that was.
func writeNow(c *net.UnixConn, msg []byte) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	n := 0
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for n < len(msg) {
			m, e := unix.Write(int(fd), msg[n:])
			if e == unix.EINTR {
				continue
			}
			if e != nil {
				if e != unix.EAGAIN {
					werr = e
				}
				break
			}
			n += m
		}
		return true // done: WriteAll waits, with a deadline, for the rest
	})
	return n, errors.Join(err, werr)
}
