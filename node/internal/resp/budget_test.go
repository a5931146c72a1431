package resp

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// argsRequest is a multibulk EXISTS whose keys are n arguments of size
// bytes each, split after the first `upTo` keys (the rest is returned
// separately, for a client that stalls in the middle of its request).
func argsRequest(n, size, upTo int) (head, tail string) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n$6\r\nEXISTS\r\n", n+1)
	key := strings.Repeat("k", size)
	for i := range n {
		if i == upTo {
			head = b.String()
			b.Reset()
		}
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", size, key)
	}
	if upTo >= n {
		return b.String(), ""
	}
	return head, b.String()
}

// waitUsed polls until the server's client memory satisfies ok (the
// deadline only bounds a hang).
func waitUsed(t *testing.T, s *Server, what string, ok func(int64) bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !ok(s.mem.used.Load()); {
		if time.Now().After(deadline) {
			t.Fatalf("client memory stayed at %d bytes, waiting for %s", s.mem.used.Load(), what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The connections together hold at most MaxClientMemory of arguments: a
// request that would pass it is answered -OOM and its connection closed,
// while the client holding the memory is still served, and everything is
// returned once the requests end.
func TestClientMemoryIsBoundedAcrossConnections(t *testing.T) {
	s, _ := testServer(t, func(c *Config, _ *fakeCluster) {
		c.MaxClientMemory = 256 << 10
		c.MaxArgLen = 64 << 10
	})
	const keySize = 60 << 10

	// A sends three of four 60 KiB keys and stalls: it holds 128 KiB.
	a, ar := rawConn(t, s)
	head, tail := argsRequest(4, keySize, 3)
	if _, err := a.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, s, "the stalled request's charge", func(u int64) bool { return u >= 128<<10 })

	// B's five keys need 256 KiB more: refused, and closed.
	b, br := rawConn(t, s)
	req, _ := argsRequest(5, keySize, 5)
	if _, err := b.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	if got := expectClosed(t, br); !strings.HasPrefix(got, "-OOM the server's client memory is exhausted") {
		t.Fatalf("over the budget, B got %q", got)
	}

	// A finishes its request and is answered.
	if _, err := a.Write([]byte(tail)); err != nil {
		t.Fatal(err)
	}
	if line, err := ar.ReadString('\n'); err != nil || line != ":0\r\n" {
		t.Fatalf("A's EXISTS answered %q, %v", line, err)
	}
	stillServes(t, s)
	waitUsed(t, s, "every charge returned", func(u int64) bool { return u == 0 })
}

// A queued reply on the heap is charged to the budget until it is written,
// and the budget is whole again once the client has read it.
func TestQueuedHeapRepliesAreChargedUntilWritten(t *testing.T) {
	server, client := tcpPair(t)
	mem := &memBudget{limit: 1 << 20}
	w := newWriter(server, nil, 0, 64<<10, 8<<20, mem)
	big := make([]byte, 4<<20) // more than the socket takes at once
	w.bulk(big)
	w.flush()
	if used := mem.used.Load(); used <= 0 || used > int64(len(big))+64 {
		t.Fatalf("with a reply queued the budget holds %d bytes", used)
	}
	go func() {
		buf := make([]byte, 1<<20)
		for {
			if _, err := client.Read(buf); err != nil {
				return
			}
		}
	}()
	w.close()
	if used := mem.used.Load(); used != 0 {
		t.Fatalf("after the reply was written the budget holds %d bytes", used)
	}
}
