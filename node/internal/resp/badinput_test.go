package resp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// rawConn dials s and returns the connection with a reader of its replies.
func rawConn(t *testing.T, s *Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return nc, bufio.NewReader(nc)
}

// expectClosed reads until the server closes the connection and returns
// what it sent.
func expectClosed(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil // closed with unread input left: the kernel resets
	}
	if err != nil {
		t.Fatalf("the server did not close the connection: %v (it sent %q)", err, b)
	}
	return string(b)
}

// stillServes checks the server answers a new client.
func stillServes(t *testing.T, s *Server) {
	t.Helper()
	c := client(t, s, 2)
	ctx := context.Background()
	if err := c.Set(ctx, "after", "ok", 0).Err(); err != nil {
		t.Fatalf("the server stopped serving: %v", err)
	}
	if v := c.Get(ctx, "after").Val(); v != "ok" {
		t.Fatalf("GET after bad input = %q", v)
	}
}

// TestBadInputIsAnErrorAndAClose feeds the inputs that break the protocol:
// each gets Redis's protocol error, the connection is closed and the server
// serves everyone else.
func TestBadInputIsAnErrorAndAClose(t *testing.T) {
	s, _ := testServer(t, nil)
	for _, tc := range []struct{ name, input, want string }{
		{"bulk length of 2^40", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1099511627776\r\n", "invalid bulk length"},
		{"negative bulk length", "*2\r\n$3\r\nGET\r\n$-5\r\n", "invalid bulk length"},
		{"a length with a plus sign", "*2\r\n$+3\r\nGET\r\n", "invalid bulk length"},
		{"10^6 arguments", "*1000000\r\n", "invalid multibulk length"},
		{"not a bulk", "*2\r\n$3\r\nGET\r\n:1\r\n", "expected '$'"},
		{"garbage length", "*x\r\n", "invalid multibulk length"},
		{"no CRLF after a bulk", "*1\r\n$4\r\nPINGxx", "expected CRLF"},
		{"a key over the argument limit", "*2\r\n$3\r\nGET\r\n$100000\r\n", "over this server's limit"},
		{"an inline line over the limit", strings.Repeat("A", 70<<10), "too big inline request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, r := rawConn(t, s)
			if _, err := nc.Write([]byte(tc.input)); err != nil {
				t.Fatal(err)
			}
			got := expectClosed(t, r)
			if !strings.HasPrefix(got, "-ERR Protocol error") || !strings.Contains(got, tc.want) {
				t.Fatalf("reply %q, want a protocol error about %q", got, tc.want)
			}
			stillServes(t, s)
		})
	}
}

// TestInlineCommandsWork: telnet-style commands are served.
func TestInlineCommandsWork(t *testing.T) {
	s, _ := testServer(t, nil)
	nc, r := rawConn(t, s)
	nc.Write([]byte("PING\r\n\r\nECHO hello\r\n"))
	for _, want := range []string{"+PONG\r\n", "$5\r\n", "hello\r\n"} {
		if line, err := r.ReadString('\n'); err != nil || line != want {
			t.Fatalf("read %q, %v; want %q", line, err, want)
		}
	}
}

// TestSlowAndIdleClientsAreDisconnected: a command trickled a byte at a
// time is cut off at CommandTimeout, an unterminated one too, an idle
// connection at IdleTimeout; the server keeps serving.
func TestSlowAndIdleClientsAreDisconnected(t *testing.T) {
	s, _ := testServer(t, func(c *Config, _ *fakeCluster) {
		c.CommandTimeout = 300 * time.Millisecond
		c.IdleTimeout = 500 * time.Millisecond
	})
	t.Run("unterminated multibulk", func(t *testing.T) {
		nc, r := rawConn(t, s)
		nc.Write([]byte("*3\r\n$3\r\nSET\r\n"))
		expectClosed(t, r)
	})
	t.Run("one byte at a time", func(t *testing.T) {
		nc, r := rawConn(t, s)
		cmd := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000\r\n" + strings.Repeat("v", 1000) + "\r\n")
		sent := make(chan int, 1)
		go func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			n := 0
			for ; n < len(cmd); n++ {
				if _, err := nc.Write(cmd[n : n+1]); err != nil {
					break
				}
				<-tick.C
			}
			sent <- n
		}()
		expectClosed(t, r)
		nc.Close()
		if n := <-sent; n == len(cmd) {
			t.Fatal("the whole trickled command was read")
		}
	})
	t.Run("idle", func(t *testing.T) {
		_, r := rawConn(t, s)
		expectClosed(t, r)
	})
	stillServes(t, s)
}

// TestConnectionCapRefusesTheExtraClient: over MaxConns a client is told
// and closed; a place that frees up is taken again.
func TestConnectionCapRefusesTheExtraClient(t *testing.T) {
	s, _ := testServer(t, func(c *Config, _ *fakeCluster) { c.MaxConns = 2 })
	a, ra := rawConn(t, s)
	b, rb := rawConn(t, s)
	for _, c := range []struct {
		nc net.Conn
		r  *bufio.Reader
	}{{a, ra}, {b, rb}} {
		c.nc.Write([]byte("PING\r\n"))
		if line, _ := c.r.ReadString('\n'); line != "+PONG\r\n" {
			t.Fatalf("PING = %q", line)
		}
	}
	_, rc := rawConn(t, s)
	if got := expectClosed(t, rc); got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("the third client got %q", got)
	}
	a.Close()
	waitConns(t, s, 1)
	stillServes(t, s)
}

// TestAClientThatDoesNotReadIsDisconnected: replies a client never reads
// are not queued without bound: the write times out and the connection
// closes.
func TestAClientThatDoesNotReadIsDisconnected(t *testing.T) {
	s, _ := testServer(t, func(c *Config, _ *fakeCluster) { c.WriteTimeout = 300 * time.Millisecond })
	c := client(t, s, 2)
	ctx := context.Background()
	big := randBytes(1 << 20)
	if err := c.Set(ctx, "big", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	nc, _ := rawConn(t, s)
	nc.(*net.TCPConn).SetReadBuffer(4 << 10)
	waitConns(t, s, 2)
	get := []byte("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n")
	for range 100 { // 100 MiB of replies, never read
		if _, err := nc.Write(get); err != nil {
			break
		}
	}
	waitConns(t, s, 1)
	stillServes(t, s)
}

// waitConns polls until s serves n connections.
func waitConns(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Connections() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the server serves %d connections, want %d", s.Connections(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestInlineWritesAreServed: telnet-style SET and MSET store their values
// (an inline SET once crashed the node).
func TestInlineWritesAreServed(t *testing.T) {
	s, _ := testServer(t, nil)
	nc, r := rawConn(t, s)
	nc.Write([]byte("SET a hello\r\nMSET b 1 c 2\r\nSETNX a x\r\nGET a\r\nMGET b c\r\n"))
	want := []string{"+OK\r\n", "+OK\r\n", ":0\r\n", "$5\r\n", "hello\r\n", "*2\r\n", "$1\r\n", "1\r\n", "$1\r\n", "2\r\n"}
	for _, w := range want {
		if line, err := r.ReadString('\n'); err != nil || line != w {
			t.Fatalf("read %q, %v; want %q", line, err, w)
		}
	}
	stillServes(t, s)
}

// TestARefusedSetTakesNoSharedMemory: the value of a SET the server will
// refuse (before AUTH, a namespace the token does not allow, a key another
// node owns) is read past, not into shared memory, so it evicts nothing;
// a client that has not authenticated may not even send a large one.
func TestARefusedSetTakesNoSharedMemory(t *testing.T) {
	s, fc := testServer(t, func(c *Config, fc *fakeCluster) {
		c.ClusterMode = true
		fc.tokens = map[string]Access{"engine-token-0123456789": {Allows: func(ns string) bool { return ns == "resp:mine" }}}
	})
	ctx := context.Background()
	eng := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Password: "engine-token-0123456789", MaxRetries: -1})
	defer eng.Close()
	big := randBytes(14 << 20)
	for i := range 4 { // 56 MiB of the 64 MiB store, in this node's slots (bar, slot 5061): one more evicts
		if err := eng.Set(ctx, fmt.Sprintf("mine@{bar}%d", i), big, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	before := fc.st.Stats()
	for _, k := range []string{"other@{bar}x", "mine@{foo}x"} { // NOPERM, MOVED
		if err := eng.Set(ctx, k, big, 0).Err(); err == nil {
			t.Fatalf("SET %s answered OK", k)
		}
	}
	nc, r := rawConn(t, s)
	fmt.Fprintf(nc, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n", len(big))
	nc.Write(big)
	if got := expectClosed(t, r); !strings.Contains(got, "Protocol error: invalid bulk length") {
		t.Fatalf("a large SET before AUTH: %q", got)
	}
	after := fc.st.Stats()
	var ev0, ev1 uint64
	for _, n := range before.Evictions {
		ev0 += n
	}
	for _, n := range after.Evictions {
		ev1 += n
	}
	if ev1 != ev0 || after.Chunks != before.Chunks {
		t.Fatalf("refused SETs evicted %d chunks (%d → %d held)", ev1-ev0, before.Chunks, after.Chunks)
	}
}

// TestAPipelineOfLargeValuesIsServed: a client that sends a whole pipeline
// — GET of a 16 MiB value, SET of another, GET of it — before it reads any
// reply is served (one goroutine that blocked writing the first reply
// while the client blocked sending the SET deadlocked until the write
// timeout), and the reply queue's bound holds.
func TestAPipelineOfLargeValuesIsServed(t *testing.T) {
	s, _ := testServer(t, func(c *Config, _ *fakeCluster) { c.WriteTimeout = 2 * time.Second })
	c := client(t, s, 2)
	ctx := context.Background()
	a, b := randBytes(16<<20), randBytes(16<<20)
	if err := c.Set(ctx, "a", a, 0).Err(); err != nil {
		t.Fatal(err)
	}
	nc, r := rawConn(t, s)
	sent := make(chan error, 1)
	go func() {
		var buf bytes.Buffer
		buf.WriteString("*2\r\n$3\r\nGET\r\n$1\r\na\r\n")
		fmt.Fprintf(&buf, "*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$%d\r\n", len(b))
		buf.Write(b)
		buf.WriteString("\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n")
		_, err := nc.Write(buf.Bytes())
		sent <- err
	}()
	readBulk := func(want []byte) {
		t.Helper()
		line, err := r.ReadString('\n')
		if err != nil || line != fmt.Sprintf("$%d\r\n", len(want)) {
			t.Fatalf("reply header %q, %v", line, err)
		}
		got := make([]byte, len(want)+2)
		if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got[:len(want)], want) {
			t.Fatalf("reply of %d bytes: %v, equal %v", len(want), err, bytes.Equal(got[:len(want)], want))
		}
	}
	select { // the whole pipeline goes out before any reply is read
	case err := <-sent:
		if err != nil {
			t.Fatalf("sending the pipeline: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server stopped reading the pipeline while its first reply was unread")
	}
	readBulk(a)
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("SET reply %q, %v", line, err)
	}
	readBulk(b)
}
