package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
)

// dirNode is a `kvring serve` process started by startInDir.
type dirNode struct {
	cmd  *exec.Cmd
	logs *testutil.Logs
	done chan struct{} // closed once the process has exited
}

// startInDir starts `kvring serve` with args in the working directory dir,
// with the environment of the test minus KVRING_SOCKET (so the default
// socket path is the one under test), waits until it is ready and kills it
// when the test ends.
func startInDir(t *testing.T, dir string, args ...string) *dirNode {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatalf("cannot build kvring: %v", err)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0",
		"--admin-addr", "127.0.0.1:0", "--resp-addr", "127.0.0.1:0", "--shm-dir", shmDir(t), "--memory-limit", "64MiB"}, args...)...)
	cmd.Dir = dir
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KVRING_SOCKET=") })
	cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	n := &dirNode{cmd: cmd, logs: new(testutil.Logs), done: make(chan struct{})}
	cmd.Stderr = n.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(n.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-n.done
	})
	testutil.Eventually(t, "the node to be ready", 60*time.Second, func() bool {
		return n.logs.Count(`msg="node ready"`) > 0 || n.exited()
	})
	if n.exited() {
		t.Fatalf("kvring serve %q exited:\n%s", args, n.logs)
	}
	return n
}

func (n *dirNode) exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and fails the test unless the node exits 0 in time.
func (n *dirNode) stop(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("no exit within 60s of SIGTERM:\n%s", n.logs)
	}
	if !n.cmd.ProcessState.Success() {
		t.Fatalf("%v after SIGTERM:\n%s", n.cmd.ProcessState, n.logs)
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
