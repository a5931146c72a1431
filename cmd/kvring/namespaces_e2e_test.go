package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
)

// namespacesAt runs `kvring namespaces --json` at admin and returns the
// namespaces by name.
func namespacesAt(t *testing.T, admin string) (clusterNamespaces, map[string]clusterNamespace) {
	t.Helper()
	r := mustCLI(t, nil, "namespaces", "--admin", admin, "--json")
	var list clusterNamespaces
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("namespaces --json: %v: %v", err, r)
	}
	by := map[string]clusterNamespace{}
	for _, ns := range list.Namespaces {
		by[ns.Name] = ns
	}
	return list, by
}

// TestReadsOfAMisspeltNamespaceRegisterNothing: against a real cluster,
// `kvring get` and `kvring lookup` of a namespace nothing was written to
// answer a clear not-found, and no node registers it: with room for one
// namespace (--max-namespaces 1), the namespace written afterwards is still
// taken, and it is the only one listed; commands at the wrong kind of port
// say so.
func TestReadsOfAMisspeltNamespaceRegisterNothing(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, "--max-namespaces", "1")
	id := strings.Repeat("ab", 32)
	for _, n := range nodes {
		r := runCLI(t, nil, "get", "--addr", n.grpc, "--namespace", "demoo", "--id", id)
		checkOneLineFailure(t, r, "not found in namespace demoo", `namespace "demoo" is not registered: nothing was written to it`)
		l := mustCLI(t, nil, "lookup", "--addr", n.grpc, "--namespace", "demoo", id)
		if !strings.Contains(l.stdout, `0 of 1 leading ids held: namespace "demoo" is not registered`) {
			t.Fatalf("lookup of a misspelt namespace: %v", l)
		}
	}
	file := filepath.Join(t.TempDir(), "chunk")
	if err := os.WriteFile(file, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, nil, "put", "--addr", nodes[1].grpc, "--namespace", "demo", file)
	list, by := namespacesAt(t, nodes[0].admin)
	if len(list.Namespaces) != 1 || by["demo"].Nodes != 3 {
		t.Fatalf("namespaces after reads of a misspelt one and a put: %+v, want demo alone, on 3 nodes", list)
	}

	// The wrong kind of port, on a real node.
	r := runCLI(t, nil, "members", "--admin", nodes[0].grpc)
	checkOneLineFailure(t, r, nodes[0].grpc+" answers gRPC, not the admin HTTP API")
	r = runCLI(t, nil, "get", "--addr", nodes[0].admin, "--namespace", "demo", "--id", id, "--timeout", "1m")
	checkOneLineFailure(t, r, nodes[0].admin+" answers HTTP/1.1, not gRPC")
}

// TestNamespacesSurviveAFullRestartOfTheCluster: after every node of a
// cluster stopped and started again, `kvring namespaces` lists the
// namespaces registered before, on every node, before any client registers
// again, and a fresh client reads their chunks (reads do not register).
func TestNamespacesSurviveAFullRestartOfTheCluster(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t)
	file := filepath.Join(t.TempDir(), "chunk")
	if err := os.WriteFile(file, []byte("kept across restarts"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, nil, "put", "--addr", nodes[0].grpc, "--namespace", "e2e/kept", "--id", strings.Repeat("cd", 32), file)
	for _, n := range nodes {
		stopNode(t, n)
	}
	first := restartNode(t, nodes[0])
	again := []*e2eNode{first, restartNode(t, nodes[1], "--join", first.gossip), restartNode(t, nodes[2], "--join", first.gossip)}
	testutil.Eventually(t, "every node to see three active members", 30*time.Second, func() bool {
		for _, n := range again {
			if !seesRing(n, again[0].id, again[1].id, again[2].id) {
				return false
			}
		}
		return true
	})
	_, by := namespacesAt(t, again[0].admin)
	if ns, ok := by["e2e/kept"]; !ok || ns.Nodes != 3 || ns.Chunks != 1 {
		t.Fatalf("after a full restart: %+v, want e2e/kept on 3 nodes with its chunk", by)
	}
	r := mustCLI(t, nil, "get", "--addr", again[2].grpc, "--namespace", "e2e/kept", "--id", strings.Repeat("cd", 32))
	if r.stdout != "kept across restarts" {
		t.Fatalf("get after a full restart: %v", r)
	}
}
