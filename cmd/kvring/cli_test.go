package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvring/kvring/node"
)

// runInProcess runs the kvring command tree in the test process with args
// and returns what it printed and its error: for the commands whose
// behaviour a fake server can drive, without building the binary.
func runInProcess(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// fakeAdmin is an admin API answering /v1/cluster with members and
// /v1/namespaces with namespaces.
func fakeAdmin(t *testing.T, members func() []node.ClusterMember, namespaces []node.NamespaceInfo) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/cluster", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(node.ClusterInfo{NodeID: "n", Epoch: 1, Members: members()})
	})
	mux.HandleFunc("GET /v1/namespaces", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"namespaces": namespaces})
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// TestNamespacesJSONPrintsJSON: `kvring namespaces --json` prints one JSON
// object with every namespace summed over the members, not the table.
func TestNamespacesJSONPrintsJSON(t *testing.T) {
	t.Parallel()
	var members []node.ClusterMember
	info := func(chunks int64) []node.NamespaceInfo {
		return []node.NamespaceInfo{{Name: "llama", Schema: node.NamespaceSchema{Model: "llama-8b", TokensPerChunk: 16},
			ReplicationFactor: 2, MinReplicas: 1, Chunks: chunks, Bytes: chunks * 1024}}
	}
	a := fakeAdmin(t, func() []node.ClusterMember { return members }, info(3))
	b := fakeAdmin(t, func() []node.ClusterMember { return members }, info(4))
	members = []node.ClusterMember{
		{ID: "a", Liveness: "alive", AdminAddr: strings.TrimPrefix(a.URL, "http://")},
		{ID: "b", Liveness: "alive", AdminAddr: strings.TrimPrefix(b.URL, "http://")},
	}
	stdout, _, err := runInProcess(t, "namespaces", "--admin", members[0].AdminAddr, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got clusterNamespaces
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("--json printed no JSON: %v:\n%s", err, stdout)
	}
	if got.Members != 2 || got.Answered != 2 || len(got.Namespaces) != 1 {
		t.Fatalf("got %+v", got)
	}
	ns := got.Namespaces[0]
	if ns.Name != "llama" || ns.Schema.Model != "llama-8b" || ns.Chunks != 7 || ns.Bytes != 7*1024 || ns.Nodes != 2 ||
		ns.ReplicationFactor != 2 {
		t.Fatalf("namespace %+v, want llama with 7 chunks on 2 nodes", ns)
	}

	table, _, err := runInProcess(t, "namespaces", "--admin", members[0].AdminAddr)
	if err != nil || !strings.HasPrefix(table, "NAMESPACE") || !strings.Contains(table, "2 of 2") {
		t.Fatalf("the table: %v:\n%s", err, table)
	}
}
