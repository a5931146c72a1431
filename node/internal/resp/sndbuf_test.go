package resp

import (
	"bytes"
	"io"
	"net"
	"syscall"
	"testing"
)

// sendBuffer returns the kernel's send buffer size of c.
func sendBuffer(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var gerr error
	rc.Control(func(fd uintptr) { n, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF) })
	if gerr != nil {
		t.Fatal(gerr)
	}
	return n
}

// TestALargeReplyOnLoopbackCapsTheSendBuffer checks the loopback send
// buffer's sizing: a reply from smallSendFrom up caps it (the kernel
// doubles the value set), a reply between midSendFrom and smallSendFrom
// makes it large again, and small replies leave it as it is. (The
// autotuned buffer before the first cap is not compared: the kernel may
// grow it while a reply is written.)
func TestALargeReplyOnLoopbackCapsTheSendBuffer(t *testing.T) {
	server, client := loopbackPair(t)
	go io.Copy(io.Discard, client)
	w := newWriter(server, newSockIO(server), 0, 64<<10, 64<<20, &memBudget{})
	defer w.close()
	reply := func(n int) {
		w.bulkOwned(bytes.Repeat([]byte{'v'}, n), func() {})
		if err := w.flush(); err != nil {
			t.Fatal(err)
		}
	}

	reply(midSendFrom) // on an autotuned socket: nothing set (autotuning may grow it meanwhile)
	reply(smallSendFrom)
	if got := sendBuffer(t, server); got != 2*smallSendBuffer {
		t.Fatalf("after a %d-byte reply the send buffer is %d, want %d", smallSendFrom, got, 2*smallSendBuffer)
	}
	reply(100)
	if got := sendBuffer(t, server); got != 2*smallSendBuffer {
		t.Fatalf("a 100-byte reply changed the capped send buffer to %d", got)
	}
	reply(midSendFrom)
	if got := sendBuffer(t, server); got <= 2*smallSendBuffer {
		t.Fatalf("after a %d-byte reply the send buffer is still %d, want more than %d", midSendFrom, got, 2*smallSendBuffer)
	}
}

// TestOnlyLoopbackTCPConnectionsSizeTheirSendBuffer checks that the sizer
// stays off for connections that are not TCP.
func TestOnlyLoopbackTCPConnectionsSizeTheirSendBuffer(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if s := newSendSizer(a); s.rc != nil {
		t.Fatal("a pipe got a send buffer sizer")
	}
	server, _ := tcpPair(t)
	if s := newSendSizer(server); s.rc == nil {
		t.Fatal("a loopback TCP connection got no send buffer sizer")
	}
}
