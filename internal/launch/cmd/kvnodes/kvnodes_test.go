package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/launch"
)

// bins are the kvring and kvnodes binaries TestMain builds (none under
// -short).
var bins struct{ kvring, kvnodes string }

func TestMain(m *testing.M) { os.Exit(buildAndRun(m)) }

func buildAndRun(m *testing.M) int {
	for _, a := range os.Args[1:] {
		if a == "-test.short" || a == "-test.short=true" {
			return m.Run()
		}
	}
	dir, err := os.MkdirTemp("", "kvnodes-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bins.kvring, bins.kvnodes = filepath.Join(dir, "kvring"), filepath.Join(dir, "kvnodes")
	for bin, pkg := range map[string]string{bins.kvring: "../../../../cmd/kvring", bins.kvnodes: "."} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "cannot build %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	return m.Run()
}

// sourced runs bash, sources env and prints what expr expands to.
func sourced(t *testing.T, env, expr string) string {
	t.Helper()
	out, err := exec.Command("bash", "-c", `. "$1" && echo "`+expr+`"`, "bash", env).CombinedOutput()
	if err != nil {
		t.Fatalf("sourcing %s: %v: %s", env, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestKvnodesWritesTheNodesForAShellRestartsOneAndCleansUpOnSIGTERM:
// kvnodes writes an env file a shell sources for two joined nodes; `ctl
// kill` and `ctl restart` bring node 2 back on its addresses with a new
// pid (and the file says so); SIGTERM stops both nodes and removes their
// directories, the control socket and the env file.
func TestKvnodesWritesTheNodesForAShellRestartsOneAndCleansUpOnSIGTERM(t *testing.T) {
	if bins.kvnodes == "" {
		t.Skip("starts real kvring nodes: skipped by -short")
	}
	dir, shm := t.TempDir(), t.TempDir()
	env := filepath.Join(dir, "nodes.env")
	cmd := exec.Command(bins.kvnodes, "-n", "2", "-kvring", bins.kvring, "-resp", "-env", env, "-shm-root", shm,
		"-dir", filepath.Join(dir, "nodes"), "--", "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := launch.StartProcess(cmd); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { cmd.Process.Kill(); <-exited }()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(env); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no env file within 2 minutes")
		}
	}
	admins := strings.Fields(sourced(t, env, "${admins[*]}"))
	ids := strings.Fields(sourced(t, env, "${ids[*]}"))
	if len(admins) != 2 || len(ids) != 2 || sourced(t, env, "${#resps[@]} ${kv_nodes}") != "2 2" {
		t.Fatalf("env file:\n%s", sourced(t, env, "$(cat $1)"))
	}
	if !launch.SeesRing(t.Context(), admins[1], ids...) {
		t.Fatalf("node 2 (%s) does not see the ring %v", admins[1], ids)
	}
	pid2 := sourced(t, env, "${node_pids[1]}")
	ctl := sourced(t, env, "$kv_control")
	for _, c := range []string{"kill", "restart"} {
		if out, err := exec.Command(bins.kvnodes, "ctl", ctl, c, "2").CombinedOutput(); err != nil {
			t.Fatalf("ctl %s 2: %v: %s", c, err, out)
		}
	}
	if again := sourced(t, env, "${node_pids[1]}"); again == pid2 || !launch.SeesRing(t.Context(), admins[1], ids...) {
		t.Fatalf("after the restart: pid %s (was %s), ring seen by %s: want a new pid in the same ring", again, pid2, admins[1])
	}
	pids := strings.Fields(sourced(t, env, "${node_pids[*]}"))
	shmDirs := strings.Fields(sourced(t, env, "${shm_dirs[*]}"))
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Fatalf("kvnodes after SIGTERM: %v", err)
	}
	exited <- nil // for the deferred kill
	for _, p := range pids {
		if n, _ := strconv.Atoi(p); !launch.ProcessGone(n) {
			t.Fatalf("node pid %d still runs", n)
		}
	}
	for _, p := range append(shmDirs, env, ctl, filepath.Join(dir, "nodes", "n1")) {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s is left after SIGTERM: %v", p, err)
		}
	}
}
