package main

import (
	"bufio"
	"strings"
	"testing"
)

// TestKeySlotMatchesRedisCluster checks keySlot against slots Redis Cluster
// gives (CLUSTER KEYSLOT), hash tags included: a wrong slot would send every
// request of a cluster run through a -MOVED.
func TestKeySlotMatchesRedisCluster(t *testing.T) {
	for key, want := range map[string]int{
		"foo": 12182, "bar": 5061, "key:000000000000": 13053,
		"{user1000}.following": 3443, "{user1000}.followers": 3443, "foo{}{bar}": 8363, "{}foo": 9500,
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestReadReplyKinds reads each kind of answer the benchmark meets; a value
// must land whole in the connection's buffer.
func TestReadReplyKinds(t *testing.T) {
	stream := "+OK\r\n$5\r\nhello\r\n$-1\r\n-MOVED 3999 127.0.0.1:7001\r\n-OOM no room\r\n:1\r\n"
	c := &rconn{br: bufio.NewReader(strings.NewReader(stream))}
	want := []reply{{kind: replyOK}, {kind: replyValue, n: 5}, {kind: replyNil},
		{kind: replyMoved, msg: "3999 127.0.0.1:7001"}, {kind: replyError, msg: "OOM no room"}, {kind: replyOK}}
	for i, w := range want {
		got, err := c.readReply()
		if err != nil || got != w {
			t.Fatalf("answer %d: %+v, %v; want %+v", i, got, err, w)
		}
		if w.kind == replyValue && string(c.val[:w.n]) != "hello" {
			t.Fatalf("value %q", c.val[:w.n])
		}
	}
	if _, err := c.readReply(); err == nil {
		t.Fatal("read past the stream's end without an error")
	}
}

// TestRouterFollowsMoved records a -MOVED target for its slot only.
func TestRouterFollowsMoved(t *testing.T) {
	r := &router{cluster: true}
	for i := range r.slots {
		r.slots[i] = "a:1"
	}
	addr, err := r.moved("12182 b:2")
	if err != nil || addr != "b:2" || r.addr("foo") != "b:2" || r.addr("bar") != "a:1" {
		t.Fatalf("moved: %q %v; foo -> %q, bar -> %q", addr, err, r.addr("foo"), r.addr("bar"))
	}
	if _, err := r.moved("x b:2"); err == nil {
		t.Fatal("a malformed MOVED was taken")
	}
}
