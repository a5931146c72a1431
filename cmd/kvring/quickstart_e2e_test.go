package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/launch"
)

// dirNode is a `kvring serve` process started by startInDir.
type dirNode struct{ proc }

// startInDir starts `kvring serve` with args in the working directory dir,
// with the environment of the test minus KVRING_SOCKET (so the default
// socket path is the one under test), waits until it is ready and kills it
// when the test ends. It runs the command itself (launch.Spawn), not
// through the launcher's node flags: the defaults are what it tests.
func startInDir(t *testing.T, dir string, args ...string) *dirNode {
	t.Helper()
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KVRING_SOCKET=") })
	p, err := launch.Spawn(launch.Command{Dir: dir, Env: append(env, "GORACE=atexit_sleep_ms=0"),
		Args: append([]string{kvringBinary(t), "serve", "--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0",
			"--admin-addr", "127.0.0.1:0", "--resp-addr", "127.0.0.1:0", "--shm-dir", shmDir(t), "--memory-limit", "64MiB"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	n := &dirNode{proc{p}}
	n.waitLog(t, regexp.MustCompile(`msg="node ready"`), 60*time.Second)
	return n
}

// stop sends SIGTERM and fails the test unless the node exits 0 in time.
func (n *dirNode) stop(t *testing.T) {
	t.Helper()
	if err := n.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("no exit within 60s of SIGTERM:\n%s", n.logs())
	}
	if !n.State().Success() {
		t.Fatalf("%v after SIGTERM:\n%s", n.State(), n.logs())
	}
}

// TestTwoNodesStartedFromOneDirectoryEachHaveTheirOwnSocket: `kvring serve` with the default --socket, once
// with the default data directory and once with --data-dir n2, both from one working directory: each serves
// its local socket inside its own data directory, neither collides with the other, and after SIGTERM the
// directory holds the two data directories and nothing else (no socket file beside them).
func TestTwoNodesStartedFromOneDirectoryEachHaveTheirOwnSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n1 := startInDir(t, dir)
	n2 := startInDir(t, dir, "--data-dir", "n2")
	for _, sock := range []string{"kvring-data/kvring.sock", "n2/kvring.sock"} {
		fi, err := os.Stat(filepath.Join(dir, sock))
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Errorf("%s: %v, mode %v: want the node's local socket", sock, err, fi)
		}
	}
	n1.stop(t)
	n2.stop(t)
	var names []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"kvring-data", "n2"}) {
		t.Errorf("the working directory holds %q after both nodes stopped, want [kvring-data n2]", names)
	}
	for _, sock := range []string{"kvring-data/kvring.sock", "n2/kvring.sock"} {
		if _, err := os.Lstat(filepath.Join(dir, sock)); !os.IsNotExist(err) {
			t.Errorf("%s still there after SIGTERM: %v", sock, err)
		}
	}
}
