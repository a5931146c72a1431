package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
)

// orphanHelperEnv makes TestHelperNodeOfAKilledTestBinary run: it is the
// test binary that TestAKilledTestBinaryLeavesNothingBehind kills.
const orphanHelperEnv = "KVRING_TEST_ORPHAN_HELPER"

// TestAKilledTestBinaryLeavesNothingBehind: a test binary SIGKILLed while a
// node it started is serving (as a timeout's panic or a killed CI job would
// end it) takes the node with it (Pdeathsig), and its scratch directories
// (the node's data and /dev/shm segments, its temporary directories) are
// removed by its janitor at once.
func TestAKilledTestBinaryLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	bin := kvringBinary(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestHelperNodeOfAKilledTestBinary$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), orphanHelperEnv+"=1", e2eBinaryEnv+"="+bin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.Start(cmd); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var pid int
	var dirs []string
	deadline := time.After(2 * time.Minute)
	for pid == 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("the helper test binary exited without starting its node: %s", stderr.String())
			}
			if rest, found := strings.CutPrefix(l, "node pid="); found {
				f := strings.Fields(rest)
				pid, _ = strconv.Atoi(f[0])
				dirs = f[1:]
			}
		case <-deadline:
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the helper test binary did not start its node within 2m: %s", stderr.String())
		}
	}
	if testutil.ProcessGone(pid) {
		t.Fatalf("node %d is not running before its test binary is killed", pid)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("before the kill: %v", err)
		}
	}

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	go func() {
		for range lines {
		}
	}()
	testutil.Eventually(t, fmt.Sprintf("node %d to die with its test binary", pid), 30*time.Second, func() bool {
		return testutil.ProcessGone(pid)
	})
	testutil.Eventually(t, "the janitor to remove "+strings.Join(dirs, " "), 30*time.Second, func() bool {
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				return false
			}
		}
		return true
	})
}

// TestHelperNodeOfAKilledTestBinary is the test binary that
// TestAKilledTestBinaryLeavesNothingBehind kills: it starts a node, prints
// its pid and the scratch directories, and waits to be killed.
func TestHelperNodeOfAKilledTestBinary(t *testing.T) {
	if os.Getenv(orphanHelperEnv) == "" {
		t.Skip("run by TestAKilledTestBinaryLeavesNothingBehind")
	}
	n := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0")
	// The scratch directories: $TMPDIR (the node's data directory is in it)
	// and the /dev/shm one that holds the node's segment directory.
	fmt.Printf("node pid=%d %s %s\n", n.Pid(), os.TempDir(), filepath.Dir(n.shm))
	time.Sleep(5 * time.Minute) // killed long before; -test.timeout ends it otherwise
}
