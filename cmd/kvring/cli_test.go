package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kvring/kvring/internal/testutil"
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

// TestNamespacesShowTheGroupSize: `kvring namespaces` shows a grouped
// namespace's placement group size, in the table and in --json, and "-" for
// a namespace placed chunk by chunk.
func TestNamespacesShowTheGroupSize(t *testing.T) {
	t.Parallel()
	var members []node.ClusterMember
	a := fakeAdmin(t, func() []node.ClusterMember { return members }, []node.NamespaceInfo{
		{Name: "grouped", Schema: node.NamespaceSchema{Model: "llama-8b", TokensPerChunk: 16, ChunksPerGroup: 32},
			ReplicationFactor: 1, MinReplicas: 1},
		{Name: "single", Schema: node.NamespaceSchema{Model: "llama-8b", TokensPerChunk: 16}, ReplicationFactor: 1, MinReplicas: 1},
	})
	members = []node.ClusterMember{{ID: "a", Liveness: "alive", AdminAddr: strings.TrimPrefix(a.URL, "http://")}}
	table, _, err := runInProcess(t, "namespaces", "--admin", members[0].AdminAddr)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !slices.Equal(strings.Fields(lines[0])[:3], []string{"NAMESPACE", "MODEL", "GROUP"}) ||
		!slices.Equal(strings.Fields(lines[1])[:3], []string{"grouped", "llama-8b", "32"}) ||
		!slices.Equal(strings.Fields(lines[2])[:3], []string{"single", "llama-8b", "-"}) {
		t.Fatalf("the table does not show the group sizes 32 and -:\n%s", table)
	}
	stdout, _, err := runInProcess(t, "namespaces", "--admin", members[0].AdminAddr, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got clusterNamespaces
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Namespaces) != 2 {
		t.Fatalf("--json: %v:\n%s", err, stdout)
	}
	if k := got.Namespaces[0].Schema.ChunksPerGroup; got.Namespaces[0].Name != "grouped" || k != 32 {
		t.Fatalf("--json lists %s with chunks_per_group %d, want grouped with 32:\n%s", got.Namespaces[0].Name, k, stdout)
	}
}

// someID is a chunk id for commands that need one.
const someID = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// TestAnAdminCommandAtTheGRPCPortSaysSo: an admin command pointed at a
// gRPC port says that it reached gRPC and which port to use, instead of
// net/http's "malformed HTTP response" with the frame's bytes.
func TestAnAdminCommandAtTheGRPCPortSaysSo(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	addr := lis.Addr().String()
	for _, args := range [][]string{{"members"}, {"stats"}, {"namespaces"}, {"drain"}} {
		_, _, err := runInProcess(t, append(args, "--admin", addr)...)
		want := addr + " answers gRPC, not the admin HTTP API: use --admin with a node's admin port (default 9602)"
		if err == nil || err.Error() != want {
			t.Errorf("kvring %s at a gRPC port: %v\nwant: %s", args[0], err, want)
		}
	}
}

// TestADataCommandAtTheAdminPortSaysSo: put, get and lookup pointed at an
// HTTP port (the admin API's) say at once that it answers HTTP, not gRPC,
// and which port to use, instead of waiting --timeout for "http2: frame too
// large".
func TestADataCommandAtTheAdminPortSaysSo(t *testing.T) {
	t.Parallel()
	admin := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(admin.Close)
	addr := strings.TrimPrefix(admin.URL, "http://")
	file := writeConfig(t, "chunk bytes") // any file
	for _, args := range [][]string{{"put", file}, {"get", "--id", someID}, {"lookup", someID}} {
		_, _, err := runInProcess(t, append(args, "--addr", addr, "--namespace", "ns", "--timeout", "1m")...)
		want := addr + " answers HTTP/1.1, not gRPC: is it a node's admin port? Use --addr with a node's gRPC port (default 9600)"
		if err == nil || err.Error() != want {
			t.Errorf("kvring %s at an HTTP port: %v\nwant: %s", args[0], err, want)
		}
	}
}

// TestARefusedConnectionFailsAtOnceWithTheCause: put, get, lookup and bench
// at a port where nothing listens fail with "connection refused" naming the
// address as soon as the attempt is refused, not after --timeout (the error
// would then say "within 1m0s").
func TestARefusedConnectionFailsAtOnceWithTheCause(t *testing.T) {
	t.Parallel()
	hold, err := testutil.HoldPort("127.0.0.1:0") // bound, not listening: connections are refused
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Close() })
	addr := hold.Addr()
	file := writeConfig(t, "chunk bytes")
	for _, args := range [][]string{
		{"put", file, "--namespace", "ns"}, {"get", "--id", someID, "--namespace", "ns"}, {"lookup", someID, "--namespace", "ns"},
		{"bench", "--max-requests", "1", "--progress", "0"},
	} {
		_, _, err := runInProcess(t, append(args, "--addr", addr, "--timeout", "1m")...)
		want := "cannot connect to kvring node at " + addr + ": connection refused (is a kvring node listening there?)"
		if err == nil || err.Error() != want {
			t.Errorf("kvring %s at a refused port: %v\nwant: %s", args[0], err, want)
		}
	}
}
