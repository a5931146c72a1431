package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const pingCmd = "*1\r\n$4\r\nPING\r\n"

// dialPing connects to addr and sends one PING, which must be answered
// +PONG.
func dialPing(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if err := ping(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ping sends PING on c and reads its reply (its own small buffer: an idle
// crowd must not cost this process much either).
func ping(c net.Conn) error {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, pingCmd); err != nil {
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

// openIdle opens n connections to addr that each send one PING and then
// stay idle. On an error it closes what it opened.
func openIdle(addr string, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := dialPing(addr)
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("idle connection %d of %d: %w", len(conns)+1, n, err)
		}
		conns = append(conns, c)
	}
	return conns, nil
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// activeLoad runs clients connections that each SET a new key of size
// bytes and GET it back, in turn, for d; it returns requests per second
// (SETs and GETs together). tag keeps each run's keys apart.
func activeLoad(addr string, clients, size int, d time.Duration, tag string) (float64, error) {
	value := bytes.Repeat([]byte{'v'}, size)
	var ops atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	deadline := time.Now().Add(d)
	start := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := client(addr, fmt.Sprintf("respidle:%s:%d", tag, i), value, deadline, &ops); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(ops.Load()) / time.Since(start).Seconds(), nil
}

// client is one active connection of activeLoad.
func client(addr, prefix string, value []byte, deadline time.Time, ops *atomic.Int64) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(deadline.Add(30 * time.Second))
	br, bw := bufio.NewReaderSize(c, 64<<10), bufio.NewWriterSize(c, 64<<10)
	for i := 0; time.Now().Before(deadline); i++ {
		key := prefix + ":" + strconv.Itoa(i)
		fmt.Fprintf(bw, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n", len(key), key, len(value))
		bw.Write(value)
		bw.WriteString("\r\n")
		if err := bw.Flush(); err != nil {
			return err
		}
		if line, err := br.ReadString('\n'); err != nil || line != "+OK\r\n" {
			return fmt.Errorf("SET %s: %q %v", key, line, err)
		}
		fmt.Fprintf(bw, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key)
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := readBulk(br, len(value)); err != nil {
			return fmt.Errorf("GET %s: %w", key, err)
		}
		ops.Add(2)
	}
	return nil
}

// readBulk reads a bulk reply of size bytes.
func readBulk(br *bufio.Reader, size int) error {
	line, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "$"+strconv.Itoa(size)+"\r\n" {
		return fmt.Errorf("reply %q, want a bulk of %d bytes", line, size)
	}
	_, err = br.Discard(size + 2)
	return err
}

// overCap opens connections to addr until one is refused (at most limit+1)
// and returns the refused one's reply and the connections admitted.
func overCap(addr string, limit int) (string, []net.Conn, error) {
	var open []net.Conn
	for range limit + 1 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			closeAll(open)
			return "", nil, err
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, pingCmd)
		line, err := bufio.NewReader(c).ReadString('\n')
		c.SetDeadline(time.Time{})
		if err != nil || line != "+PONG\r\n" {
			c.Close()
			return line, open, nil
		}
		open = append(open, c)
	}
	return "", open, nil
}

// awaitDrained waits (up to a minute) until the server at addr counts no
// connection but the one that asks (INFO clients), so that a run does not
// share the machine with the closing of a crowd.
func awaitDrained(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(c)
	for {
		io.WriteString(c, "*2\r\n$4\r\nINFO\r\n$7\r\nclients\r\n")
		head, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
		if err != nil {
			return fmt.Errorf("INFO answered %q", head)
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(br, body); err != nil {
			return err
		}
		if strings.Contains(string(body), "connected_clients:1\r\n") {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}
