package node

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
)

// TestGRPCConnectionsPastTheCapsAreClosed: the gRPC port lets one address
// hold at most GRPCMaxConnsPerAddr connections (there was no cap: 2,000
// idle HTTP/2 connections held 38 MiB); further ones are closed as soon as
// they are accepted and counted, and the node keeps serving an engine. Once
// the hoarded connections close, new ones are let in.
func TestGRPCConnectionsPastTheCapsAreClosed(t *testing.T) {
	t.Parallel()
	cfg := testNodeConfig(t)
	cfg.Conns = ConnLimitsConfig{GRPCMaxConnsPerAddr: 8}
	n := startNode(t, cfg)
	var hoard []net.Conn
	defer func() {
		for _, c := range hoard {
			c.Close()
		}
	}()
	closed := 0
	for range 20 {
		c, err := net.DialTimeout("tcp", n.GRPCAddr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// A refused connection ends at once; an admitted one is sent the
		// server's HTTP/2 settings and stays open.
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var b [9]byte
		if _, err := io.ReadFull(c, b[:]); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err) {
			closed++
			c.Close()
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Time{})
		hoard = append(hoard, c)
	}
	if len(hoard) != 8 || closed != 12 {
		t.Fatalf("%d connections from one address admitted, %d closed; want 8 and 12", len(hoard), closed)
	}
	_, body := httpGet(t, "http://"+n.AdminAddr()+"/metrics")
	if !strings.Contains(body, `kvring_connections_refused_total{cap="addr",listener="grpc"} 12`) {
		t.Fatalf("/metrics does not count the 12 refused connections:\n%s", grepLines(body, "kvring_connections_refused_total"))
	}
	for _, c := range hoard {
		c.Close()
	}
	hoard = nil
	c := testClient(t, n.GRPCAddr(), 1, 1)
	if res, err := c.Put(context.Background(), []client.Chunk{chunkOf(1, 4096)}); err != nil || res[0].Status != client.Stored {
		t.Fatalf("a put once the hoarded connections closed: %v %+v", err, res)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
