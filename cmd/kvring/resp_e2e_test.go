package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
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
