package resp

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// TestLargeValueLeavesWithItsTrailer checks that a value written from its
// own memory leaves together with its header and CRLF: nothing of the
// reply stays pending for a later flush, so a client never waits for the
// reply's last two bytes.
func TestLargeValueLeavesWithItsTrailer(t *testing.T) {
	server, client := tcpPair(t)
	w := newWriter(server, nil, 0, 64<<10, 1<<20, &memBudget{})
	defer w.close()

	value := bytes.Repeat([]byte{'v'}, bigReply*2)
	want := append(append([]byte("$32768\r\n"), value...), '\r', '\n')
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(want))
		io.ReadFull(client, b)
		got <- b
	}()
	released := false
	w.bulkOwned(value, func() { released = true })
	if len(w.buf) != 0 {
		t.Fatalf("%d bytes of the reply stay pending after bulkOwned: %q", len(w.buf), w.buf)
	}
	if !released {
		t.Fatal("the value was written but not released")
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("client read %d bytes, not the reply", len(b))
	}
}

// tcpPair returns the two ends of a loopback TCP connection whose buffers
// hold a few large replies, so that writes do not wait for the reader.
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	server, client = loopbackPair(t)
	server.SetWriteBuffer(1 << 20)
	client.SetReadBuffer(1 << 20)
	return server, client
}

// loopbackPair returns the two ends of a loopback TCP connection with the
// kernel's buffer sizes; both are closed when the test ends.
func loopbackPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return server, client
}
