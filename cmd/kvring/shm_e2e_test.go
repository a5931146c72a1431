package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShmListAndRemoveAStoppedNodesSegments: `kvring shm list` shows a
// running node's segment directory in use by its process, `kvring shm
// remove` refuses it while the node runs, saying so with the node's pid and
// that it must be stopped first, and removes it, freeing its memory, once
// the node was killed.
func TestShmListAndRemoveAStoppedNodesSegments(t *testing.T) {
	t.Parallel()
	shm := shmDir(t)
	n := startNode(t, t.TempDir(), shm, "127.0.0.1:0", "127.0.0.1:0")
	file := filepath.Join(t.TempDir(), "chunk")
	if err := os.WriteFile(file, []byte("some chunk bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, nil, "put", "--addr", n.grpc, "--namespace", "shm/test", file)
	list := mustCLI(t, nil, "shm", "list", "--shm-dir", shm)
	pid := fmt.Sprintf("pid %d", n.Pid())
	if !strings.Contains(list.stdout, n.id) || !strings.Contains(list.stdout, "yes ("+pid+")") {
		t.Fatalf("shm list while the node runs: %s", list.stdout)
	}
	r := runCLI(t, nil, "shm", "remove", n.id, "--shm-dir", shm)
	checkOneLineFailure(t, r, "node "+n.id+" is running ("+pid+")", "stop it first")
	if strings.Contains(r.stderr, "data directory") {
		t.Fatalf("the hint for a second node on one data directory: %v", r)
	}
	n.kill(t)
	list = mustCLI(t, nil, "shm", "list", "--shm-dir", shm)
	if !strings.Contains(list.stdout, n.id) || strings.Contains(list.stdout, "yes") {
		t.Fatalf("shm list after the kill: %s", list.stdout)
	}
	mustCLI(t, nil, "shm", "remove", n.id, "--shm-dir", shm)
	if list = mustCLI(t, nil, "shm", "list", "--shm-dir", shm); strings.Contains(list.stdout, n.id) {
		t.Fatalf("shm list after remove: %s", list.stdout)
	}
}
