package resp

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
)

// dialRaw connects to s and sends cmd (raw protocol bytes).
func dialRaw(t *testing.T, s *Server, cmd string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(nc, cmd); err != nil {
		t.Fatal(err)
	}
	return nc, bufio.NewReader(nc)
}

// writersRunning counts the server's connections whose writing goroutine
// runs.
func writersRunning(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		c.w.mu.Lock()
		if c.w.running {
			n++
		}
		c.w.mu.Unlock()
	}
	return n
}

// TestAnIdleConnectionHoldsNoBuffers: connections that were served and
// wait for their next command hold no buffers of the pool and have no
// writing goroutine; one whose command is half sent holds its buffers
// until the command is served.
func TestAnIdleConnectionHoldsNoBuffers(t *testing.T) {
	s, _ := testServer(t, nil)
	const n = 20
	for range n {
		_, br := dialRaw(t, s, "*1\r\n$4\r\nPING\r\n")
		if line, err := br.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			t.Fatalf("PING answered %q, %v", line, err)
		}
	}
	testutil.Eventually(t, "the idle connections to give their buffers back", 10*time.Second,
		func() bool { return s.bufsHeld.Load() == 0 && s.Connections() == n })
	if w := writersRunning(s); w != 0 {
		t.Fatalf("%d idle connections have a writing goroutine", w)
	}

	nc, br := dialRaw(t, s, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhel")
	testutil.Eventually(t, "the connection with a command half sent to hold its buffers", 10*time.Second,
		func() bool { return s.bufsHeld.Load() == 1 })
	io.WriteString(nc, "lo\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
	var got strings.Builder
	for range 3 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(line)
	}
	if got.String() != "+OK\r\n$5\r\nhello\r\n" {
		t.Fatalf("SET and GET answered %q", got.String())
	}
	testutil.Eventually(t, "the served connection to give its buffers back", 10*time.Second,
		func() bool { return s.bufsHeld.Load() == 0 })
}

// TestAQueuedReplyIsWrittenByAGoroutineThatEnds: a reply the client does
// not read at once is written from the writing goroutine, which ends once
// the client has read it all.
func TestAQueuedReplyIsWrittenByAGoroutineThatEnds(t *testing.T) {
	s, _ := testServer(t, nil)
	const size = 8 << 20
	c := client(t, s, 2)
	if err := c.Set(t.Context(), "big", strings.Repeat("v", size), 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, br := dialRaw(t, s, "*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n")
	testutil.Eventually(t, "the GET's reply to be queued", 10*time.Second, func() bool { return writersRunning(s) == 1 })
	if line, err := br.ReadString('\n'); err != nil || line != "$8388608\r\n" {
		t.Fatalf("GET answered %q, %v", line, err)
	}
	if _, err := br.Discard(size + 2); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the writing goroutine to end and the buffers to be back", 10*time.Second,
		func() bool { return writersRunning(s) == 0 && s.bufsHeld.Load() == 0 })
}
