package resp

import (
	"net"
	"syscall"
)

// Send buffers on loopback. A client on the node's own host (LMCache beside
// its vLLM engine, redis://localhost) receives over loopback, where the
// kernel copies a reply twice, into the socket buffer on the node's write
// and out of it on the client's read, and nothing else: no wire, no
// round-trip time to cover. Left to autotuning, a socket buffer grows to
// 4 MiB, so a reply of several MiB is copied in whole before the client
// reads any of it, and with many connections the bytes have left the CPU's
// caches by the time the client copies them out: the client, which is the
// bottleneck of a large GET on a shared host, then reads from memory.
// Capping the buffer keeps the bytes in flight per connection small enough
// that the client copies them while they are cached: redis-benchmark GETs
// of 2 MiB values went from 634 to 825 per second, and the client's CPU
// per GET from 1.59 to 1.18 ms (16 connections, one run alternating the
// binaries; docs/benchmarks.md). A reply smaller than the cap would
// instead have to wait for the client part way (256 KiB GETs with every
// reply capped: 7,688 against 8,472 per second), so the cap applies while
// replies are large only: a connection's buffer is set small for a reply
// from smallSendFrom up and large again for a reply of midSendFrom up to
// smallSendFrom (one system call per change). On other addresses nothing
// changes: a capped buffer would cap a connection's throughput at the
// buffer over the round-trip time.
const (
	// smallSendFrom is the reply size from which a loopback connection's
	// send buffer is capped at smallSendBuffer.
	smallSendFrom = 1 << 20
	// smallSendBuffer is the capped send buffer (the kernel doubles the
	// value set, for its bookkeeping).
	smallSendBuffer = 128 << 10
	// midSendFrom is the reply size from which a capped buffer is made
	// large again (largeSendBuffer), so that one reply fits it whole.
	midSendFrom = 64 << 10
	// largeSendBuffer is asked for when a capped buffer is made large
	// again; the kernel limits it to net.core.wmem_max (208 KiB by
	// default, 416 KiB once doubled), which holds a reply below
	// smallSendFrom or most of it.
	largeSendBuffer = 4 << 20
)

// sendSizer sets a loopback connection's send buffer by the size of the
// replies it writes (see smallSendFrom). For the connection's goroutine
// only.
type sendSizer struct {
	rc  syscall.RawConn // nil: not a loopback TCP socket, nothing to do
	set int             // the buffer last set; 0: the kernel's autotuning
}

// newSendSizer returns the sizer of nc: active for TCP connections from a
// loopback address only.
func newSendSizer(nc net.Conn) sendSizer {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return sendSizer{}
	}
	addr, ok := tc.RemoteAddr().(*net.TCPAddr)
	if !ok || !addr.IP.IsLoopback() {
		return sendSizer{}
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return sendSizer{}
	}
	return sendSizer{rc: rc}
}

// fit sets the send buffer for a reply of n bytes, when it changes.
func (s *sendSizer) fit(n int) {
	if s.rc == nil || n < midSendFrom {
		return
	}
	want := smallSendBuffer
	if n < smallSendFrom {
		if s.set != smallSendBuffer {
			return // autotuned, or large already
		}
		want = largeSendBuffer
	}
	if s.set == want {
		return
	}
	s.set = want
	s.rc.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, want) // best effort: the reply is written either way
	})
}
