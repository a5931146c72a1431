package resp

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/kvring/kvring/store"
)

// TestSockIOWritesEverythingInOrder writes more than the socket buffers
// hold, in many pieces, while the client reads slowly: writeAll waits for
// the socket instead of failing or dropping, and the bytes arrive whole and
// in order.
func TestSockIOWritesEverythingInOrder(t *testing.T) {
	server, client := tcpPair(t)
	server.SetWriteBuffer(64 << 10)
	raw := newSockIO(server)
	if raw == nil {
		t.Fatal("a TCP connection has no raw side")
	}
	var pieces [][]byte
	var want []byte
	for i := range 300 {
		p := bytes.Repeat([]byte{byte(i)}, 1000+i*97)
		pieces = append(pieces, p)
		want = append(want, p...)
	}
	got := make(chan []byte, 1)
	go func() {
		var b []byte
		buf := make([]byte, 7000)
		for len(b) < len(want) {
			n, err := client.Read(buf)
			b = append(b, buf[:n]...)
			if err != nil {
				break
			}
		}
		got <- b
	}()
	server.SetWriteDeadline(time.Now().Add(20 * time.Second))
	n, err := raw.writeAll(pieces)
	if err != nil || n != int64(len(want)) {
		t.Fatalf("writeAll wrote %d of %d bytes: %v", n, len(want), err)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("client read %d bytes, not the %d written in order", len(b), len(want))
	}
}

// TestSockIOWriteNowNeverWaits fills a socket nobody reads: writeNow
// returns what the socket took (less than asked), at once, with no error;
// writeAll then times out at the write deadline.
func TestSockIOWriteNowNeverWaits(t *testing.T) {
	server, _ := tcpPair(t)
	raw := newSockIO(server)
	big := make([]byte, 64<<20)
	n, err := raw.writeNow([][]byte{big[:32<<20], big[32<<20:]})
	if err != nil || n <= 0 || n >= int64(len(big)) {
		t.Fatalf("writeNow on a socket nobody reads wrote %d of %d bytes, err %v", n, len(big), err)
	}
	if n2, err := raw.writeNow([][]byte{big}); err != nil || n2 != 0 {
		t.Fatalf("writeNow on a full socket wrote %d bytes, err %v: want 0, nil", n2, err)
	}
	server.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, err = raw.writeAll([][]byte{big})
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("writeAll past its deadline returned %v, want a timeout", err)
	}
}

// TestSockIOReadReportsEndsAsNetDoes: bytes, then a timeout at the read
// deadline, then io.EOF when the peer closes, then net.ErrClosed once the
// connection is closed here; the conn's error handling depends on these.
func TestSockIOReadReportsEndsAsNetDoes(t *testing.T) {
	server, client := tcpPair(t)
	raw := newSockIO(server)
	client.Write([]byte("PING\r\n"))
	buf := make([]byte, 64)
	if n, err := raw.Read(buf); err != nil || string(buf[:n]) != "PING\r\n" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	server.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := raw.Read(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline returned %v, want a timeout", err)
	}
	server.SetReadDeadline(time.Time{})
	client.Close()
	if _, err := raw.Read(buf); err != io.EOF {
		t.Fatalf("Read after the peer closed returned %v, want io.EOF", err)
	}
	server.Close()
	if _, err := raw.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read of a closed connection returned %v, want net.ErrClosed", err)
	}
}

// TestTLSConnectionsUseNetsOwnPath: a TLS connection's bytes are not the
// socket's, so it has no raw side.
func TestTLSConnectionsUseNetsOwnPath(t *testing.T) {
	server, _ := tcpPair(t)
	if newSockIO(tls.Server(server, &tls.Config{})) != nil {
		t.Fatal("a TLS connection got a raw side")
	}
}

// TestAValueReadPastKeepsTheStreamInStep: a value the reader does not keep
// (refused here; a stored key's value likewise) is read past through the
// scratch buffers in pieces as it arrives, and the command after it is
// read whole; a connection that ends inside such a value is an unexpected
// EOF, not a request.
func TestAValueReadPastKeepsTheStreamInStep(t *testing.T) {
	server, client := tcpPair(t)
	lim := limits{maxArgs: 16, maxArgLen: 1 << 10, maxArgBytes: 1 << 20, maxInline: 1 << 10, maxValue: 16 << 20, maxValues: 64 << 20}
	rd := newReader(newSockIO(server), readBuffer, lim)
	rd.scratch = newScratch()
	refuse := func(string, []byte) error { return errRefused }
	value := bytes.Repeat([]byte{'v'}, 3*discardPiece+123)
	go func() {
		fmt.Fprintf(client, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n", len(value))
		for p := value; len(p) > 0; p = p[min(len(p), 70000):] { // in pieces, as a network delivers it
			client.Write(p[:min(len(p), 70000)])
		}
		client.Write([]byte("\r\n*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nshort"))
		client.Close()
	}()
	noAlloc := func(int64) (*store.Blob, error) { t.Fatal("a refused value took memory"); return nil, nil }
	req, err := rd.read(noAlloc, refuse)
	if err != nil || req.name != "set" || !errors.Is(req.values[0].err, errRefused) {
		t.Fatalf("the SET: %+v, %v", req, err)
	}
	if req, err = rd.read(noAlloc, refuse); err != nil || req.name != "ping" {
		t.Fatalf("the command after a value read past: %+v, %v", req, err)
	}
	if _, err = rd.read(noAlloc, refuse); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a connection that ended inside a value: %v, want io.ErrUnexpectedEOF", err)
	}
}
