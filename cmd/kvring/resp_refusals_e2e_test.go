package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// nsMetric is kvring_resp_namespace_<kind>_total{namespace,result} summed
// over nodes (a node that has no such series counts 0).
func nsMetric(t *testing.T, nodes []*e2eNode, kind, namespace, result string) float64 {
	t.Helper()
	sum := 0.0
	for _, n := range nodes {
		v, _ := metricValue(t, n, fmt.Sprintf(`kvring_resp_namespace_%s_total{namespace="%s",result="%s"}`, kind, namespace, result))
		sum += v
	}
	return sum
}

// TestRefusedSetsShowInTheMetricsAndTheLog: a node of 16 MiB whose chunks
// EXISTS pinned (leases of 10 minutes: a client may pin three quarters of
// the memory) refuses SETs of 5 MiB with -OOM. Each refusal counts in
// kvring_resp_errors_total{reason="no_space"} and in its namespace's
// refused writes, and the node's log has one WARN line naming the
// namespace and the reason (rate-limited: one a minute), though LMCache,
// which never waits on its puts, would not have said a word.
func TestRefusedSetsShowInTheMetricsAndTheLog(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--resp-addr", "127.0.0.1:0",
		"--memory-limit", "16MiB", "--max-pinned", "16MiB", "--resp-exists-lease", "10m")
	c := redis.NewClient(&redis.Options{Addr: n.respAddr(t), MaxRetries: -1, ReadTimeout: 30 * time.Second})
	defer c.Close()
	ctx := context.Background()
	const ns = "resp:Qwen/Qwen2.5-0.5B-Instruct:1:0:bfloat16"
	key := func(i int) string { return fmt.Sprintf("Qwen/Qwen2.5-0.5B-Instruct@1@0@%x@bfloat16kv_bytes", 0xf00+i) }
	for i := range 16 {
		if err := c.Set(ctx, key(i), bytes.Repeat([]byte{7}, 1<<20), 0).Err(); err != nil {
			t.Fatalf("SET %d of 1 MiB: %v", i, err)
		}
		if got, err := c.Exists(ctx, key(i)).Result(); err != nil || got != 1 { // pins it for 10 minutes
			t.Fatalf("EXISTS of a key just stored = %d, %v", got, err)
		}
	}
	const refused = 3
	for i := range refused {
		if err := c.Set(ctx, key(100+i), bytes.Repeat([]byte{8}, 5<<20), 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
			t.Fatalf("SET of 5 MiB with 12 of 16 MiB pinned: %v, want -OOM", err)
		}
	}
	if v, _ := metricValue(t, n, `kvring_resp_errors_total{reason="no_space"}`); v != float64(refused) {
		t.Errorf(`kvring_resp_errors_total{reason="no_space"} = %v, want %d`, v, refused)
	}
	if v := nsMetric(t, []*e2eNode{n}, "writes", ns, "refused"); v != float64(refused) {
		t.Errorf("refused writes of %s = %v, want %d", ns, v, refused)
	}
	if v := nsMetric(t, []*e2eNode{n}, "writes", ns, "stored"); v != 16 {
		t.Errorf("stored writes of %s = %v, want 16", ns, v)
	}
	line := regexp.MustCompile(`level=WARN msg="Redis-protocol write refused: the value is not stored" .*namespace=` +
		regexp.QuoteMeta(ns) + ` reason=no_space command=set reply="OOM `)
	if got := line.FindAllString(n.logs(), -1); len(got) != 1 {
		t.Fatalf("%d WARN lines naming the namespace and no_space for %d refusals within a minute, want 1:\n%s",
			len(got), refused, n.logs())
	}
}

// TestWrittenNeverReadShowsInTheNamespaceMetrics: engines that hash
// prefixes with different seeds (PYTHONHASHSEED) write the same prompt
// through two nodes under different keys; each looks its chunks up, misses
// and stores them: the namespace's writes grow and its hits stay 0 on every
// node, which KvringWrittenNeverRead alerts on. An engine with the first
// one's seed, through the third node, then hits every chunk.
func TestWrittenNeverReadShowsInTheNamespaceMetrics(t *testing.T) {
	needTool(t, exec.Command("/usr/bin/python3", "-c", "import redis"), "Debian's python3-redis")
	nodes, addrs := respCluster(t)
	const ns, chunks = "resp:Qwen/Qwen2.5-0.5B-Instruct:1:0:bfloat16", 8
	engine := func(addr, seed string) string {
		cmd := exec.Command("/usr/bin/python3", "testdata/resp_seeds.py", addr, fmt.Sprint(chunks))
		cmd.Env = append(os.Environ(), "PYTHONHASHSEED="+seed)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("resp_seeds.py with PYTHONHASHSEED=%s: %v\n%s", seed, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for i, seed := range []string{"1", "2"} {
		if got, want := engine(addrs[i], seed), fmt.Sprintf("hits 0 misses 1 stored %d", chunks); got != want {
			t.Fatalf("the engine with PYTHONHASHSEED=%s: %q, want %q", seed, got, want)
		}
	}
	writes, hits, misses := nsMetric(t, nodes, "writes", ns, "stored"), nsMetric(t, nodes, "reads", ns, "hit"), nsMetric(t, nodes, "reads", ns, "miss")
	if writes != 4*chunks || hits != 0 || misses < 1 {
		t.Fatalf("after two seeds: %v keys stored, %v hits, %v misses in %s; want %d, 0, at least 1", writes, hits, misses, ns, 4*chunks)
	}
	if got, want := engine(addrs[2], "1"), fmt.Sprintf("hits %d misses 0 stored 0", chunks); got != want {
		t.Fatalf("an engine with the first one's seed: %q, want %q", got, want)
	}
	if hits := nsMetric(t, nodes, "reads", ns, "hit"); hits < 3*chunks { // EXISTS metadata, GET kv_bytes, GET metadata
		t.Fatalf("after the same seed: %v hits, want %d", hits, 3*chunks)
	}
}
