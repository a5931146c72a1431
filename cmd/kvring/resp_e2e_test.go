package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var respRe = regexp.MustCompile(`msg="node ready".* resp=(\S+)`)

// respAddr is the Redis-protocol address node n logged when ready.
func (n *e2eNode) respAddr(t *testing.T) string {
	t.Helper()
	m := n.waitLog(t, respRe, 5*time.Second)
	if m[1] == "off" {
		t.Fatalf("node %s serves no Redis-protocol port", n.id)
	}
	return m[1]
}

// respCluster starts three nodes with a Redis-protocol port each.
func respCluster(t *testing.T, extra ...string) ([]*e2eNode, []string) {
	t.Helper()
	nodes := startCluster(t, append([]string{"--resp-addr", "127.0.0.1:0"}, extra...)...)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.respAddr(t)
	}
	return nodes, addrs
}

// needTool skips the test when a Debian tool it drives is missing, unless
// KVRING_REDIS_TEST=1 (CI installs them), which makes that a failure.
func needTool(t *testing.T, check *exec.Cmd, what string) {
	t.Helper()
	if err := check.Run(); err != nil {
		if os.Getenv("KVRING_REDIS_TEST") == "1" {
			t.Fatalf("%s is missing (%v) and KVRING_REDIS_TEST=1", what, err)
		}
		t.Skipf("%s is missing (%v): apt-get install it, or set KVRING_REDIS_TEST=1 to fail instead", what, err)
	}
}

// TestRedisPyRunsLMCachesPatternThroughACluster: redis-py, as LMCache's
// remote tier uses it, writes each chunk's kv_bytes and metadata through
// one node and reads them through another, byte-exact, at 256 KiB, 2 MiB
// and 8 MiB, plainly, pipelined and with MGET.
func TestRedisPyRunsLMCachesPatternThroughACluster(t *testing.T) {
	needTool(t, exec.Command("/usr/bin/python3", "-c", "import redis"), "Debian's python3-redis")
	_, addrs := respCluster(t)
	out, err := exec.Command("/usr/bin/python3", append([]string{"testdata/resp_lmcache.py"}, addrs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("resp_lmcache.py: %v\n%s", err, out)
	}
	for _, size := range []string{"262144", "2097152", "8388608"} {
		if !strings.Contains(string(out), size+" bytes: ok") {
			t.Fatalf("resp_lmcache.py did not check %s-byte values:\n%s", size, out)
		}
	}
}

// TestASetIsOKOnlyForAValueThatIsHeld: with one of two nodes killed, a SET
// is either OK and then read back byte-exact, or an error and then a GET
// returns nothing or the same bytes; never OK for a value nobody holds.
// With min-replicas 2 every SET fails while a node is down.
func TestASetIsOKOnlyForAValueThatIsHeld(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		allOK bool // every SET must fail
	}{
		{"replication 1 (writes go to the next member)", nil, false},
		{"min-replicas 2", []string{"--replication", "2", "--min-replicas", "2"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := append([]string{"--resp-addr", "127.0.0.1:0"}, tc.flags...)
			n1 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", extra...)
			n2 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", append([]string{"--join", n1.gossip}, extra...)...)
			waitRing(t, n1, n2)
			c := redis.NewClient(&redis.Options{Addr: n1.respAddr(t), MaxRetries: -1, ReadTimeout: 30 * time.Second})
			defer c.Close()
			ctx := context.Background()
			n2.kill(t)
			ok, failed := 0, 0
			for i := range 40 {
				key := fmt.Sprintf("vllm@m@1@0@%04xkv_bytes", i)
				val := make([]byte, 64<<10)
				rand.Read(val)
				err := c.Set(ctx, key, val, 0).Err()
				got, gerr := c.Get(ctx, key).Bytes()
				switch {
				case err == nil && (gerr != nil || !bytes.Equal(got, val)):
					t.Fatalf("SET %s answered OK but GET = %d bytes, %v", key, len(got), gerr)
				case err == nil:
					ok++
				case gerr == nil && !bytes.Equal(got, val):
					t.Fatalf("SET %s failed (%v) and GET returned other bytes", key, err)
				default:
					failed++
					if !strings.HasPrefix(err.Error(), "TRYAGAIN") && !strings.HasPrefix(err.Error(), "ERR") && !strings.HasPrefix(err.Error(), "OOM") {
						t.Fatalf("SET %s: %v, want a Redis error reply", key, err)
					}
				}
			}
			t.Logf("%d SETs OK, %d failed", ok, failed)
			if tc.allOK && ok > 0 {
				t.Fatalf("%d SETs answered OK with one of two holders dead and min-replicas 2", ok)
			}
		})
	}
}

// TestRedisCliAndRedisBenchmarkWork: Debian's redis-cli answers PING, INFO,
// SET and GET against a node, and redis-benchmark runs ping, set, get and
// mset without an error line.
func TestRedisCliAndRedisBenchmarkWork(t *testing.T) {
	needTool(t, exec.Command("redis-benchmark", "--version"), "Debian's redis-tools")
	_, addrs := respCluster(t)
	host, port, _ := strings.Cut(addrs[0], ":")
	cli := func(args ...string) string {
		out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := cli("PING"); got != "PONG" {
		t.Fatalf("PING = %q", got)
	}
	if got := cli("SET", "vllm@m@1@0@abc", "hello"); got != "OK" {
		t.Fatalf("SET = %q", got)
	}
	_, port2, _ := strings.Cut(addrs[1], ":")
	if out, _ := exec.Command("redis-cli", "-h", host, "-p", port2, "GET", "vllm@m@1@0@abc").Output(); strings.TrimSpace(string(out)) != "hello" {
		t.Fatalf("GET through another node = %q", out)
	}
	if info := cli("INFO"); !strings.Contains(info, "redis_version:") || !strings.Contains(info, "keyspace_hits:") {
		t.Fatalf("INFO = %s", info)
	}
	out, err := exec.Command("redis-benchmark", "-h", host, "-p", port, "-c", "8", "-n", "2000", "-d", "4096",
		"-r", "1000", "-t", "ping,set,get,mset", "-q").CombinedOutput()
	if err != nil || strings.Contains(string(out), "rror") {
		t.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	for _, test := range []string{"SET:", "GET:", "MSET"} {
		if !strings.Contains(string(out), test) {
			t.Fatalf("redis-benchmark did not run %s:\n%s", test, out)
		}
	}
}

// movedCounter counts the -MOVED replies a cluster client's node clients
// see (the cluster client follows them).
type movedCounter struct{ n atomic.Int64 }

func (m *movedCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (m *movedCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && strings.HasPrefix(err.Error(), "MOVED ") {
			m.n.Add(1)
		}
		return err
	}
}
func (m *movedCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestGoRedisClusterClientFollowsTheRing: go-redis's ClusterClient against
// three nodes in Redis Cluster mode: CLUSTER SLOTS agrees with where values
// are stored, a steady workload sees no MOVED after the first refresh, and
// after a fourth node joins the client follows MOVED and reads every key
// back; redis-cli -c follows redirects too.
func TestGoRedisClusterClientFollowsTheRing(t *testing.T) {
	nodes, addrs := respCluster(t, "--resp-cluster", "--settle-window", "2s")
	moved := &movedCounter{}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 8, ReadTimeout: 30 * time.Second})
	defer cc.Close()
	cc.OnNewNode(func(c *redis.Client) { c.AddHook(moved) })
	ctx := context.Background()
	vals := map[string][]byte{}
	for i := range 200 {
		k := fmt.Sprintf("vllm@m@1@0@%04xkv_bytes", i)
		vals[k] = make([]byte, 4096+i)
		rand.Read(vals[k])
		if err := cc.Set(ctx, k, vals[k], 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	cc.ReloadState(ctx)
	before := moved.n.Load()
	for k, v := range vals {
		if got, err := cc.Get(ctx, k).Bytes(); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("GET %s: %v", k, err)
		}
	}
	if n := moved.n.Load() - before; n != 0 {
		t.Fatalf("a steady workload saw %d MOVED replies", n)
	}
	// Where CLUSTER SLOTS says each key lives, a plain client reads it
	// without a redirect, and the nodes hold one copy of each key in all.
	//lint:ignore SA1019 CLUSTER SLOTS is what cluster clients (go-redis's own ClusterClient) read
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		total += c.DBSize(ctx).Val()
		c.Close()
	}
	if total != int64(len(vals)) {
		t.Fatalf("the nodes hold %d values, want %d (one copy each)", total, len(vals))
	}
	for k, v := range vals {
		owner := slotOwner(t, slots, k)
		c := redis.NewClient(&redis.Options{Addr: owner, MaxRetries: -1})
		got, err := c.Get(ctx, k).Bytes()
		c.Close()
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("GET %s at %s, its slot's owner: %v", k, owner, err)
		}
	}
	// A fourth node joins: slots move with the ring.
	n4 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--join", nodes[0].gossip, "--resp-addr", "127.0.0.1:0", "--resp-cluster", "--settle-window", "2s")
	waitRing(t, append(nodes, n4)...)
	// While the ring settles (and the hand-off runs) nodes serve keys where
	// they arrive; then the slots that moved answer MOVED, which the client
	// follows. Every read, all along, returns the value.
	before = moved.n.Load()
	deadline := time.Now().Add(90 * time.Second)
	for rounds := 1; moved.n.Load() == before; rounds++ {
		if time.Now().After(deadline) {
			t.Fatalf("no MOVED in %d rounds of reads after the join", rounds)
		}
		for k, v := range vals {
			if got, err := cc.Get(ctx, k).Bytes(); err != nil || !bytes.Equal(got, v) {
				t.Fatalf("GET %s after a join (round %d): %v", k, rounds, err)
			}
		}
	}
	t.Logf("after the join the client followed %d MOVED replies", moved.n.Load()-before)
	for k, v := range vals {
		if got, err := cc.Get(ctx, k).Bytes(); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("GET %s once settled: %v", k, err)
		}
	}
	needTool(t, exec.Command("redis-cli", "--version"), "Debian's redis-tools")
	host, port, _ := strings.Cut(addrs[0], ":")
	for k := range vals {
		out, err := exec.Command("redis-cli", "-c", "-h", host, "-p", port, "STRLEN", k).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(len(vals[k])) {
			t.Fatalf("redis-cli -c STRLEN %s = %q, %v", k, out, err)
		}
		break
	}
}

// slotOwner is the address CLUSTER SLOTS gives for key's slot.
func slotOwner(t *testing.T, slots []redis.ClusterSlot, key string) string {
	t.Helper()
	s := int(crc16XModem([]byte(key)) % 16384)
	for _, r := range slots {
		if r.Start <= s && s <= r.End {
			return r.Nodes[0].Addr
		}
	}
	t.Fatalf("no range holds slot %d", s)
	return ""
}

// crc16XModem is Redis Cluster's key hash, written again here so the test
// does not trust the server's.
func crc16XModem(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// TestTheRedisPortUsesTheNodesTLSAndTokens: with TLS and tokens, the
// Redis-protocol port speaks TLS with the node's certificate, wants AUTH
// with an engine token whose namespace prefixes apply, and FLUSHDB needs the
// admin token.
func TestTheRedisPortUsesTheNodesTLSAndTokens(t *testing.T) {
	pki := newTestPKI(t)
	tokens := writeFile(t, "tokens", "engine-token-0123456789 resp:vllm:llama\n")
	admin := writeFile(t, "admin", "admin-token-0123456789\n")
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", append(pki.tlsArgs(),
		"--auth-tokens-file", tokens, "--admin-token-file", admin, "--resp-addr", "127.0.0.1:0")...)
	addr := n.respAddr(t)
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(pki.ca)
	pool.AppendCertsFromPEM(caPEM)
	tlsCfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	ctx := context.Background()
	dial := func(password string, tlsOn bool) *redis.Client {
		o := &redis.Options{Addr: addr, Password: password, MaxRetries: -1, DialTimeout: 5 * time.Second}
		if tlsOn {
			o.TLSConfig = tlsCfg
		}
		c := redis.NewClient(o)
		t.Cleanup(func() { c.Close() })
		return c
	}
	if err := dial("", false).Ping(ctx).Err(); err == nil {
		t.Fatal("a plaintext client was answered on a TLS port")
	}
	if err := dial("", true).Set(ctx, "vllm@llama@1@0@a", "v", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("SET without AUTH: %v, want NOAUTH", err)
	}
	if err := dial("wrong-token-0123456789", true).Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Fatalf("a wrong token: %v, want WRONGPASS", err)
	}
	eng := dial("engine-token-0123456789", true)
	if err := eng.Set(ctx, "vllm@llama@1@0@a", "v", 0).Err(); err != nil {
		t.Fatalf("SET with the engine token: %v", err)
	}
	if v := eng.Get(ctx, "vllm@llama@1@0@a").Val(); v != "v" {
		t.Fatalf("GET = %q", v)
	}
	if err := eng.Set(ctx, "vllm@mistral@1@0@a", "v", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("SET outside the token's namespaces: %v, want NOPERM", err)
	}
	if err := eng.FlushDB(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("FLUSHDB with an engine token: %v, want NOPERM", err)
	}
	if err := dial("admin-token-0123456789", true).FlushDB(ctx).Err(); err != nil {
		t.Fatalf("FLUSHDB with the admin token: %v", err)
	}
	if n := eng.Exists(ctx, "vllm@llama@1@0@a").Val(); n != 0 {
		t.Fatalf("EXISTS after FLUSHDB = %d", n)
	}
}

// TestScanListsEveryKeyThroughTheCluster: redis-cli --scan through one node
// lists every key written through any node, once a ring change has moved
// some of them to a new member too (a key's name travels with its chunk).
func TestScanListsEveryKeyThroughTheCluster(t *testing.T) {
	needTool(t, exec.Command("redis-cli", "--version"), "Debian's redis-tools")
	nodes, addrs := respCluster(t)
	ctx := context.Background()
	want := map[string]bool{}
	for i := range 300 {
		c := redis.NewClient(&redis.Options{Addr: addrs[i%3]})
		k := fmt.Sprintf("vllm@m@1@%d@%04xkv_bytes", i%2, i)
		if err := c.Set(ctx, k, "value", 0).Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
		want[k] = true
	}
	scan := func(addr, pattern string) map[string]bool {
		host, port, _ := strings.Cut(addr, ":")
		out, err := exec.Command("redis-cli", "-h", host, "-p", port, "--scan", "--pattern", pattern).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli --scan: %v\n%s", err, out)
		}
		got := map[string]bool{}
		for _, l := range strings.Fields(string(out)) {
			got[l] = true
		}
		return got
	}
	equal := func(got map[string]bool, want map[string]bool) bool {
		if len(got) != len(want) {
			return false
		}
		for k := range want {
			if !got[k] {
				return false
			}
		}
		return true
	}
	if got := scan(addrs[1], "*"); !equal(got, want) {
		t.Fatalf("redis-cli --scan listed %d keys, want %d", len(got), len(want))
	}
	half := map[string]bool{}
	for k := range want {
		if strings.HasPrefix(k, "vllm@m@1@1@") {
			half[k] = true
		}
	}
	if got := scan(addrs[2], "vllm@m@1@1@*"); !equal(got, half) {
		t.Fatalf("redis-cli --scan --pattern listed %d keys, want %d", len(got), len(half))
	}
	n4 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--join", nodes[0].gossip, "--resp-addr", "127.0.0.1:0")
	waitRing(t, append(nodes, n4)...)
	a4 := redis.NewClient(&redis.Options{Addr: n4.respAddr(t)})
	defer a4.Close()
	deadline := time.Now().Add(60 * time.Second)
	for a4.DBSize(ctx).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no chunk was handed to the new member")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := scan(n4.respAddr(t), "*"); len(got) != len(want) || !equal(got, want) {
		t.Fatalf("after a hand-off redis-cli --scan listed %d keys, want %d", len(got), len(want))
	}
}

// rssBytes is the resident memory of process pid (VmRSS).
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestBadRedisInputLeavesTheNodeServing feeds the real binary what breaks
// the protocol — garbage, a bulk length of 2^40, 10^6 arguments, an
// unterminated multibulk, a sender of one byte at a time — 20 times each
// on connections of their own: each gets an error or a close within the
// command timeout, the node keeps serving, and its memory does not grow.
func TestBadRedisInputLeavesTheNodeServing(t *testing.T) {
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--resp-addr", "127.0.0.1:0",
		"--resp-command-timeout", "1s")
	addr := n.respAddr(t)
	good := redis.NewClient(&redis.Options{Addr: addr})
	defer good.Close()
	ctx := context.Background()
	if err := good.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	before := rssBytes(t, n.Pid())
	inputs := []string{
		"\x00\x01\x02garbage\r\n\xff\xfe",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1099511627776\r\n",
		"*1000000\r\n",
		"*3\r\n$3\r\nSET\r\n",
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20*len(inputs))
	for round := range 20 { // at once: the unterminated ones wait out the command timeout together
		for _, in := range inputs {
			wg.Go(func() {
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					errs <- err
					return
				}
				defer nc.Close()
				nc.SetDeadline(time.Now().Add(30 * time.Second))
				nc.Write([]byte(in))
				if _, err := io.ReadAll(nc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
					errs <- fmt.Errorf("round %d, input %q: the node did not close the connection: %w", round, in[:min(len(in), 20)], err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	start := time.Now()
	cmd := "*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$100\r\n" + strings.Repeat("v", 100) + "\r\n"
	for i := 0; i < len(cmd); i++ {
		if _, err := slow.Write([]byte{cmd[i]}); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // a sender of 20 bytes a second, not a wait for the node
		if time.Since(start) > 20*time.Second {
			t.Fatal("a client sending a byte every 50 ms was not disconnected within 20s (command timeout 1s)")
		}
	}
	if v, err := good.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after the bad input: GET = %q, %v", v, err)
	}
	if grown := rssBytes(t, n.Pid()) - before; grown > 64<<20 {
		t.Fatalf("the node's RSS grew %d MiB under bad input", grown>>20)
	}
}
