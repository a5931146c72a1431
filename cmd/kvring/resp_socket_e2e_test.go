package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvring/kvring/internal/testutil"
)

var respSocketRe = regexp.MustCompile(`msg="node ready".* resp_socket=(\S+)`)

// socketCluster starts three nodes with a Redis-protocol TCP port each; the
// first also serves the port on a Unix socket with flags sock (passed again
// to restart it).
func socketCluster(t *testing.T, sock []string) []*e2eNode {
	t.Helper()
	tcp := []string{"--resp-addr", "127.0.0.1:0"}
	n1 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", slices.Concat(tcp, sock)...)
	join := slices.Concat([]string{"--join", n1.gossip}, tcp)
	n2 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", join...)
	n3 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", join...)
	nodes := []*e2eNode{n1, n2, n3}
	testutil.Eventually(t, "every node to see three active members", 20*time.Second, func() bool {
		for _, n := range nodes {
			if !seesRing(n, n1.id, n2.id, n3.id) {
				return false
			}
		}
		return true
	})
	return nodes
}

// checkSocketFile fails unless path is a socket file with mode perm.
func checkSocketFile(t *testing.T, path string, perm os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != perm {
		t.Fatalf("the Redis-protocol socket %s: %v, %v; want a socket of mode %04o", path, fi, err, perm)
	}
}

// TestLMCachesPatternThroughTheUnixSocket: redis-py, as LMCache's redis
// connector opens remote_url "unix:///path" (redis.from_url), runs
// LMCache's pattern (SET kv_bytes, SET metadata, EXISTS metadata, GET both,
// pipelined, MGET) through node 1's Unix socket against values written
// through node 2's TCP port, and the other way round, byte-exact. The
// socket file has --resp-socket-mode; a second node cannot take the live
// socket; after node 1 is killed (its socket file left behind) it starts
// again on the stale file and serves through it.
func TestLMCachesPatternThroughTheUnixSocket(t *testing.T) {
	needTool(t, exec.Command("/usr/bin/python3", "-c", "import redis"), "Debian's python3-redis")
	path := filepath.Join(testutil.SocketDir(t), "resp.sock")
	sock := []string{"--resp-socket", path, "--resp-socket-mode", "0640"}
	nodes := socketCluster(t, sock)
	n1 := nodes[0]
	if m := n1.waitLog(t, respSocketRe, 5*time.Second); m[1] != path {
		t.Fatalf("node 1's ready line names socket %s, want %s", m[1], path)
	}
	checkSocketFile(t, path, 0o640)
	cmd := exec.Command("/usr/bin/python3", "testdata/resp_lmcache.py", nodes[1].respAddr(t), "unix://"+path)
	cmd.Env = append(os.Environ(), "RESP_LMCACHE_SIZES=262144,2097152")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "262144 bytes: ok") || !strings.Contains(string(out), "2097152 bytes: ok") {
		t.Fatalf("resp_lmcache.py through TCP of node 2 and the socket of node 1: %v\n%s", err, out)
	}

	// A live socket is refused, naming the path.
	p := startKvring(t, nil, serveArgs(t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", sock...)...)
	select {
	case <-p.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("a second node on node 1's live socket did not stop:\n%s", p.logs())
	}
	if !strings.Contains(p.logs(), path) || !strings.Contains(p.logs(), "another process is serving on it") {
		t.Fatalf("a second node on a live socket: want an error naming %s:\n%s", path, p.logs())
	}
	checkSocketFile(t, path, 0o640) // and the live one is untouched

	n1.kill(t)
	checkSocketFile(t, path, 0o640) // left behind: stale
	n1 = restartNode(t, n1, slices.Concat([]string{"--resp-addr", "127.0.0.1:0"}, sock)...)
	checkSocketFile(t, path, 0o640)
	rc := redis.NewClient(&redis.Options{Network: "unix", Addr: path, MaxRetries: -1, ReadTimeout: 30 * time.Second})
	defer rc.Close()
	ctx := context.Background()
	testutil.Eventually(t, "a SET through the socket of the restarted node", 30*time.Second, func() bool {
		return rc.Set(ctx, "after-restart", "v", 0).Err() == nil
	})
	if v, err := rc.Get(ctx, "after-restart").Result(); err != nil || v != "v" {
		t.Fatalf("GET through the socket after the restart = %q, %v", v, err)
	}
	stopNode(t, n1)
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("the socket file after the node stopped: %v, want it removed", err)
	}
}
