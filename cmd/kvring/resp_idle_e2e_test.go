package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// idleConnBound is the most resident memory one idle Redis-protocol
// connection may cost the node in TestIdleRedisConnectionsCostLittle: for
// a plain build, and for one built with -race (as the e2e tests build the
// binary), whose detector keeps state for every goroutine and heap byte.
// Measured with 1,000 connections: a plain build ~7.5 KiB (~19 KiB before
// idle connections gave their buffers and writing goroutine back), a race
// build ~36 KiB (~125 KiB before).
const (
	idleConnBound     = 12 << 10
	idleConnBoundRace = 60 << 10
)

// TestIdleRedisConnectionsCostLittle opens 1,000 Redis-protocol
// connections that each send one PING and stay idle, against the real
// binary: the node's RSS grows by less than idleConnBound per connection
// (after a forced GC on both sides of the measurement), 4 active clients
// are served beside the crowd, the connection past --resp-max-conns is
// answered exactly "-ERR max number of clients reached", and every admitted
// connection is still served after it.
func TestIdleRedisConnectionsCostLittle(t *testing.T) {
	const idle, active, spare = 1000, 4, 6
	raiseNoFile(t, 4*(idle+active+spare))
	bin := kvringBinary(t)
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--resp-addr", "127.0.0.1:0", "--pprof",
		"--resp-max-conns", strconv.Itoa(idle+active+spare))
	addr := n.respAddr(t)
	pid := n.Pid()

	warm := dialIdle(t, addr) // the node's first connection sets up what every one shares
	warm.Close()
	forceGC(t, n.admin)
	before := rssBytes(t, pid)
	crowd := make([]net.Conn, 0, idle)
	for range idle {
		crowd = append(crowd, dialIdle(t, addr))
	}
	forceGC(t, n.admin)
	per := (rssBytes(t, pid) - before) / idle
	bound := int64(idleConnBound)
	if raceBuild(t, bin) {
		bound = idleConnBoundRace
	}
	t.Logf("%d idle connections: %d bytes of RSS each (bound %d)", idle, per, bound)
	if per > bound {
		t.Errorf("an idle connection costs the node %d bytes of RSS, want at most %d", per, bound)
	}

	clients := make([]*rawClient, active)
	for i := range clients {
		clients[i] = newRawClient(t, addr)
		clients[i].setGet(t, fmt.Sprintf("idle:%d", i), 4<<10)
	}
	extra := fillToCap(t, addr, spare)
	for _, c := range append(crowd, extra...) {
		if err := pingRaw(c); err != nil {
			t.Fatalf("an admitted connection is not served after the cap refused one: %v", err)
		}
	}
	for i, c := range clients {
		c.setGet(t, fmt.Sprintf("idle:after:%d", i), 4<<10)
	}
}

// raiseNoFile raises the test process's descriptor limit to at least n
// (the nodes it starts inherit it).
func raiseNoFile(t *testing.T, n uint64) {
	t.Helper()
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	if l.Cur >= n {
		return
	}
	l.Cur, l.Max = n, max(l.Max, n)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatalf("cannot raise RLIMIT_NOFILE to %d: %v", n, err)
	}
}

// raceBuild reports whether bin was built with the race detector.
func raceBuild(t *testing.T, bin string) bool {
	t.Helper()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// forceGC makes the node collect its garbage twice (which also shrinks
// goroutine stacks) through its profiling endpoint.
func forceGC(t *testing.T, admin string) {
	t.Helper()
	for range 2 {
		resp, err := http.Get("http://" + admin + "/debug/pprof/heap?gc=1")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/debug/pprof/heap?gc=1 answered %s", resp.Status)
		}
	}
}

// dialIdle opens a connection to addr that sends one PING; the test closes
// it at its end.
func dialIdle(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := pingRaw(c); err != nil {
		t.Fatal(err)
	}
	return c
}

// pingRaw sends PING on c and reads +PONG.
func pingRaw(c net.Conn) error {
	c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "*1\r\n$4\r\nPING\r\n"); err != nil {
		return err
	}
	var got [7]byte
	if _, err := io.ReadFull(c, got[:]); err != nil {
		return fmt.Errorf("no reply to PING: %w", err)
	}
	if string(got[:]) != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", got[:])
	}
	return nil
}

// fillToCap opens spare connections (each served a PING), then one more,
// which must be refused with exactly Redis's reply and closed.
func fillToCap(t *testing.T, addr string, spare int) []net.Conn {
	t.Helper()
	var open []net.Conn
	for range spare {
		open = append(open, dialIdle(t, addr))
	}
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "*1\r\n$4\r\nPING\r\n") // may fail: the node may have closed it already
	got, _ := io.ReadAll(c)
	if string(got) != "-ERR max number of clients reached\r\n" {
		t.Fatalf("the connection past --resp-max-conns got %q, want exactly -ERR max number of clients reached and a close", got)
	}
	return open
}

// rawClient is an active client speaking the protocol by hand.
type rawClient struct {
	c  net.Conn
	br *bufio.Reader
}

func newRawClient(t *testing.T, addr string) *rawClient {
	c := dialIdle(t, addr)
	return &rawClient{c: c, br: bufio.NewReader(c)}
}

// setGet SETs key to a value of size bytes and GETs it back.
func (r *rawClient) setGet(t *testing.T, key string, size int) {
	t.Helper()
	value := bytes.Repeat([]byte(key[:1]), size)
	r.c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(r.c, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n",
		len(key), key, size, value, len(key), key)
	if line, err := r.br.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("SET %s answered %q, %v", key, line, err)
	}
	want := fmt.Sprintf("$%d\r\n%s\r\n", size, value)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r.br, got); err != nil || string(got) != want {
		t.Fatalf("GET %s answered %.40q..., %v", key, got, err)
	}
}
