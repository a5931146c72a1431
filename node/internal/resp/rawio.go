package resp

import (
	"io"
	"net"
	"os"
	"syscall"
)

// Raw socket I/O. Go's net package calls read and writev through the
// scheduler's system-call entry, which, when the process was idle, wakes
// the runtime's monitor thread, and which lets that thread hand the
// processor to another thread while a call runs for more than ~20 us (a
// 256 KiB writev on loopback does). On a two-core virtual machine those
// thread wake-ups cost more CPU than the copying: profiles of GET showed
// the monitor's naps and the hand-offs' context switches at a third of the
// node's time. A socket is non-blocking, so a read or writev on it never
// waits in the kernel: it copies what it can and returns. sockIO calls
// them as raw system calls and waits, when the socket is not ready, in the
// network poller as net does (honouring the connection's deadlines).
// Connections that are not plain sockets (TLS) use net's own path.

// sockIO reads and writes one socket with raw system calls. Its reading
// side is for one goroutine at a time, its writing side likewise (the
// socket's own locks order them, as net's do).
type sockIO struct {
	rc syscall.RawConn

	// read's arguments and results, kept here so the function handed to
	// rc.Read is built once, not per call.
	rp     []byte
	rn     int
	rerr   syscall.Errno
	readFn func(fd uintptr) bool
	// readIdle's function, and the buffer lender it calls.
	idleFn   func(fd uintptr) bool
	lend     func() []byte
	giveBack func()

	// The same for writes: the pieces left to write, the iovec array the
	// call reads, and whether to wait for the socket until all is written.
	wbufs   [][]byte
	iov     []syscall.Iovec
	wn      int64
	werr    syscall.Errno
	wait    bool
	writeFn func(fd uintptr) bool
}

// newSockIO returns nc's raw side, or nil when nc is not a socket whose
// descriptor can be used directly (TLS, a pipe in tests).
func newSockIO(nc net.Conn) *sockIO {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &sockIO{rc: rc}
	r.readFn = r.readAttempt
	r.idleFn = r.idleAttempt
	r.writeFn = r.writeAttempt
	return r
}

// Read reads into p what the socket holds, waiting (up to the read
// deadline) while it holds nothing: io.Reader's contract, so bufio can sit
// on it.
func (r *sockIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.rp = p
	err := r.rc.Read(r.readFn)
	n, errno := r.rn, r.rerr
	r.rp, r.rn, r.rerr = nil, 0, 0
	return rawReadResult(n, errno, err)
}

// rawReadResult is what a read returns after rc.Read ended with err and the
// last attempt read n bytes or failed with errno.
func rawReadResult(n int, errno syscall.Errno, err error) (int, error) {
	switch {
	case err != nil:
		return 0, err // a deadline passed, or the connection was closed
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readAttempt makes one read call; false asks rc.Read to wait for the
// socket to become readable and call it again.
func (r *sockIO) readAttempt(fd uintptr) bool {
	for {
		n, errno := rawRead(fd, r.rp)
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.rn, r.rerr = n, errno
		return true
	}
}

// readIdle waits (up to the read deadline) until the socket has bytes to
// read, its end, or an error, without holding a buffer while it waits:
// each attempt borrows one (lend) and gives it back (giveBack) when the
// socket has nothing. It returns how many bytes the attempt that found
// some read into the buffer last lent, which the caller keeps; io.EOF at
// the socket's end.
func (r *sockIO) readIdle(lend func() []byte, giveBack func()) (int, error) {
	r.lend, r.giveBack = lend, giveBack
	err := r.rc.Read(r.idleFn)
	n, errno := r.rn, r.rerr
	r.lend, r.giveBack, r.rn, r.rerr = nil, nil, 0, 0
	return rawReadResult(n, errno, err)
}

// idleAttempt makes one read call into a borrowed buffer; false (the
// buffer given back) asks rc.Read to wait for the socket to become
// readable and call it again.
func (r *sockIO) idleAttempt(fd uintptr) bool {
	p := r.lend()
	for {
		n, errno := rawRead(fd, p)
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			r.giveBack()
			return false
		}
		r.rn, r.rerr = n, errno
		return true
	}
}

// writeNow writes as much of bufs as the socket takes at once and returns
// how many bytes it wrote; it never waits. bufs is only read until
// writeNow returns.
func (r *sockIO) writeNow(bufs [][]byte) (int64, error) {
	return r.write(bufs, false)
}

// writeAll writes all of bufs, waiting (up to the write deadline) while the
// socket buffer is full. bufs is only read until writeAll returns.
func (r *sockIO) writeAll(bufs [][]byte) (int64, error) {
	return r.write(bufs, true)
}

func (r *sockIO) write(bufs [][]byte, wait bool) (int64, error) {
	r.wbufs, r.wait = bufs, wait
	err := r.rc.Write(r.writeFn)
	n, errno := r.wn, r.werr
	r.wbufs, r.wn, r.werr = nil, 0, 0
	clear(r.iov)
	if err == nil && errno != 0 {
		err = os.NewSyscallError("writev", errno)
	}
	return n, err
}

// writeAttempt writes the pieces left until they are all written, the
// socket is full (then false, to wait, when wait is set) or a call fails.
func (r *sockIO) writeAttempt(fd uintptr) bool {
	for len(r.wbufs) > 0 {
		r.iov = r.iov[:0]
		for _, b := range r.wbufs {
			if len(b) > 0 && len(r.iov) < maxIovecs {
				r.iov = append(r.iov, iovec(b))
			}
		}
		if len(r.iov) == 0 {
			break
		}
		n, errno := rawWritev(fd, r.iov)
		switch errno {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return !r.wait
		default:
			r.werr = errno
			return true
		}
		r.wn += int64(n)
		r.consume(n)
	}
	return true
}

// consume drops n written bytes from the front of the pieces left.
func (r *sockIO) consume(n int) {
	for n > 0 && len(r.wbufs) > 0 {
		k := min(n, len(r.wbufs[0]))
		r.wbufs[0] = r.wbufs[0][k:]
		n -= k
		if len(r.wbufs[0]) == 0 {
			r.wbufs = r.wbufs[1:]
		}
	}
	for len(r.wbufs) > 0 && len(r.wbufs[0]) == 0 {
		r.wbufs = r.wbufs[1:]
	}
}

// maxIovecs is the most pieces one writev takes (the kernel's IOV_MAX).
const maxIovecs = 1024
