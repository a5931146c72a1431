package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelLine is a line resp_sentinel.py prints about the node a client
// uses: MASTER (given by the sentinels before the kill) or AFTER.
var sentinelLine = regexp.MustCompile(`^(MASTER|AFTER) (sync|async) (\S+)$`)

// TestRedisPySentinelClientsFollowALiveNode: three nodes act as sentinels
// for "redismaster" (LMCache's default REDIS_SERVICE_NAME). redis-py's
// Sentinel clients, sync and asyncio, write chunks through master_for and
// read them through master_for and slave_for, as LMCache does. The node
// they were given is SIGKILLed; their next calls, after at most a few
// retried connection errors, go through a live node, which reads back every
// chunk written before the kill (replication 2, min-replicas 2: each is on
// two nodes) and stores new ones.
func TestRedisPySentinelClientsFollowALiveNode(t *testing.T) {
	needTool(t, exec.Command("/usr/bin/python3", "-c", "import redis.asyncio.sentinel"), "Debian's python3-redis")
	nodes, addrs := respCluster(t, "--replication", "2", "--min-replicas", "2", "--resp-sentinel-master", "redismaster")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gr := goRedisFailover(t, ctx, addrs, "before")
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", append([]string{"testdata/resp_sentinel.py", "redismaster"}, addrs...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var out []string
	next := func(what string) string {
		t.Helper()
		l, ok := <-lines
		if !ok {
			cmd.Wait()
			t.Fatalf("resp_sentinel.py ended before %s:\n%s\n%s", what, strings.Join(out, "\n"), stderr.String())
		}
		out = append(out, l)
		return l
	}
	given := map[string]string{}
	for len(given) < 2 {
		if m := sentinelLine.FindStringSubmatch(next("naming its master")); m != nil && m[1] == "MASTER" {
			given[m[2]] = m[3]
		}
	}
	if given["sync"] != given["async"] || !slices.Contains(addrs, given["sync"]) {
		t.Fatalf("the sentinels gave the clients %v, want one of the nodes %v", given, addrs)
	}
	victim := slices.Index(addrs, given["sync"])
	nodes[victim].kill(t)
	io.WriteString(stdin, "killed\n")
	for l := range lines {
		out = append(out, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("resp_sentinel.py: %v\n%s\n%s", err, strings.Join(out, "\n"), stderr.String())
	}
	checkSentinelRun(t, out, addrs, given["sync"])
	if v, err := gr.Get(ctx, "go-redis-before").Result(); err != nil || v != "before" {
		t.Fatalf("go-redis's FailoverClient after the kill: GET = %q, %v", v, err)
	}
	goRedisFailover(t, ctx, addrs, "after")
}

// goRedisFailover writes key go-redis-<v> through go-redis's FailoverClient
// over the sentinels addrs and reads it back through the master and a
// replica; it returns the client (closed when the test ends).
func goRedisFailover(t *testing.T, ctx context.Context, addrs []string, v string) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "redismaster", SentinelAddrs: addrs, MaxRetries: 5})
	t.Cleanup(func() { c.Close() })
	r := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "redismaster", SentinelAddrs: addrs, ReplicaOnly: true})
	t.Cleanup(func() { r.Close() })
	if err := c.Set(ctx, "go-redis-"+v, v, 0).Err(); err != nil {
		t.Fatalf("go-redis's FailoverClient: SET: %v", err)
	}
	for _, x := range []*redis.Client{c, r} {
		if got, err := x.Get(ctx, "go-redis-"+v).Result(); err != nil || got != v {
			t.Fatalf("go-redis's FailoverClient: GET = %q, %v", got, err)
		}
	}
	return c
}

// checkSentinelRun checks that both clients finished and used a live node
// after the kill.
func checkSentinelRun(t *testing.T, out, addrs []string, killed string) {
	t.Helper()
	after := map[string]string{}
	for _, l := range out {
		if m := sentinelLine.FindStringSubmatch(l); m != nil && m[1] == "AFTER" {
			after[m[2]] = m[3]
		}
	}
	all := strings.Join(out, "\n")
	for _, who := range []string{"sync", "async"} {
		if a := after[who]; a == "" || a == killed || !slices.Contains(addrs, a) {
			t.Errorf("after the kill the %s client used %q, want a live node of %v (not %s):\n%s", who, a, addrs, killed, all)
		}
		if !strings.Contains(all, "\n"+who+": ok") {
			t.Errorf("the %s client did not finish:\n%s", who, all)
		}
	}
	t.Logf("resp_sentinel.py:\n%s", all)
}
