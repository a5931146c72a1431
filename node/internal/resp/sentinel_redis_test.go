package resp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvring/kvring/internal/testutil"
)

// startRedisServer starts Debian's redis-server with args for the test and
// returns its address (testutil.StartRedis).
func startRedisServer(t *testing.T, args ...string) string {
	addr, _ := testutil.StartRedis(t, args...)
	return addr
}

// startSentinel starts a Redis Sentinel monitoring master as "kvring".
func startSentinel(t *testing.T, master string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(master)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	if err := os.WriteFile(conf, []byte("sentinel monitor kvring "+host+" "+port+" 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startRedisServer(t, conf, "--sentinel")
}

// redisClient is a go-redis client of addr speaking RESP proto.
func redisClient(t *testing.T, addr string, proto int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto, MaxRetries: -1, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// reply is a command's reply as text: its error, nil, or its value.
func reply(c *redis.Client, args ...any) string {
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("%T", v)
}

// names are the field names of the instances of a SENTINEL reply in RESP2
// (one instance: MASTER; several: the first of MASTERS, REPLICAS...).
func names(t *testing.T, c *redis.Client, many bool, args ...any) []string {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Slice()
	if err != nil || len(v) == 0 {
		t.Fatalf("%v = %v, %v", args, v, err)
	}
	if many {
		if v, _ = v[0].([]any); v == nil {
			t.Fatalf("%v holds no instance", args)
		}
	}
	var out []string
	for i := 0; i < len(v); i += 2 {
		out = append(out, fmt.Sprint(v[i]))
	}
	return out
}

// TestSentinelAndClientMatchARealRedis: against Debian's redis-server and
// redis-server --sentinel (a master, a replica and two sentinels), the port
// answers SENTINEL with the same fields in the same order (RESP2 arrays,
// RESP3 maps) and the same errors, and CLIENT with the same errors, where
// Redis 7.0 and 7.2 agree (7.2 added SETINFO and NO-TOUCH).
func TestSentinelAndClientMatchARealRedis(t *testing.T) {
	master := startRedisServer(t)
	host, port, _ := net.SplitHostPort(master)
	startRedisServer(t, "--replicaof", host, port)
	s1 := startSentinel(t, master)
	startSentinel(t, master)
	theirs, theirs3 := redisClient(t, s1, 2), redisClient(t, s1, 3)
	testutil.Eventually(t, "the sentinel to see the replica and the other sentinel", 30*time.Second, func() bool {
		r, _ := theirs.Do(context.Background(), "SENTINEL", "REPLICAS", "kvring").Slice()
		o, _ := theirs.Do(context.Background(), "SENTINEL", "SENTINELS", "kvring").Slice()
		return len(r) == 1 && len(o) == 1
	})
	srv, _ := testServer(t, nil)
	ours, ours3 := redisClient(t, srv.Addr().String(), 2), redisClient(t, srv.Addr().String(), 3)

	for _, q := range []struct {
		many bool
		args []any
	}{
		{false, []any{"SENTINEL", "MASTER", "kvring"}},
		{true, []any{"SENTINEL", "MASTERS"}},
		{true, []any{"SENTINEL", "REPLICAS", "kvring"}},
		{true, []any{"SENTINEL", "SLAVES", "kvring"}},
		{true, []any{"SENTINEL", "SENTINELS", "kvring"}},
	} {
		if want, got := names(t, theirs, q.many, q.args...), names(t, ours, q.many, q.args...); !slices.Equal(got, want) {
			t.Errorf("%v fields:\n kvring %v\n Redis  %v", q.args, got, want)
		}
	}
	for _, args := range [][]any{
		{"SENTINEL", "MASTER", "kvring"}, {"SENTINEL", "MASTERS"}, {"SENTINEL", "REPLICAS", "kvring"},
		{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "kvring"}, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "nope"},
		{"SENTINEL", "MYID"},
	} {
		if want, got := reply(theirs3, args...), reply(ours3, args...); got != want {
			t.Errorf("RESP3 %v: kvring %s, Redis %s", args, got, want)
		}
	}
	errs := [][]any{
		{"SENTINEL", "MASTER", "nope"}, {"SENTINEL", "REPLICAS", "nope"}, {"SENTINEL", "SLAVES", "nope"},
		{"SENTINEL", "SENTINELS", "nope"}, {"SENTINEL", "MASTER"}, {"SENTINEL", "MASTERS", "x"}, {"SENTINEL", "MYID", "x"},
		{"SENTINEL", "GET-MASTER-ADDR-BY-NAME"}, {"SENTINEL", "FOO"}, {"SENTINEL"},
	}
	for _, args := range errs {
		if want, got := reply(theirs, args...), reply(ours, args...); got != want {
			t.Errorf("%v: kvring %q, Redis Sentinel %q", args, got, want)
		}
	}
	compareRaw(t, s1, srv.Addr().String(), "SENTINEL GET-MASTER-ADDR-BY-NAME nope\r\n")

	plain := redisClient(t, master, 2)
	for _, args := range [][]any{
		{"CLIENT", "MAINT_NOTIFICATIONS", "on", "moving-endpoint-type", "internal-ip"}, {"CLIENT", "FOO"},
		{"CLIENT", "SETNAME"}, {"CLIENT", "GETNAME", "x"}, {"CLIENT", "ID", "x"}, {"CLIENT", "INFO", "x"},
		{"CLIENT", "NO-EVICT"}, {"CLIENT", "NO-EVICT", "x"}, {"CLIENT", "NO-EVICT", "on"}, {"CLIENT"},
	} {
		if want, got := reply(plain, args...), reply(ours, args...); got != want {
			t.Errorf("%v: kvring %q, redis-server %q", args, got, want)
		}
	}
}

// compareRaw sends cmd to both servers on fresh connections and compares
// the first bytes of their replies, as many as Redis's.
func compareRaw(t *testing.T, redisAddr, ourAddr, cmd string) {
	t.Helper()
	read := func(addr string, n int) []byte {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(nc, cmd+"PING\r\n")
		b := make([]byte, n)
		if _, err := io.ReadFull(nc, b); err != nil {
			t.Fatalf("%q to %s: %v", cmd, addr, err)
		}
		return b
	}
	want := read(redisAddr, len("*-1\r\n+PONG\r\n"))
	if got := read(ourAddr, len(want)); !bytes.Equal(got, want) {
		t.Errorf("%q: kvring %q, Redis %q", cmd, got, want)
	}
}
