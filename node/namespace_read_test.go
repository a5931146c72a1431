package node

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvring/kvring/client"
)

// TestReadsOfAnUnknownNamespaceRegisterItNowhere: lookups and gets of a
// namespace nothing was written to (a misspelt name) answer nothing held and
// misses, through any coordinator, and no node registers it (it would count
// against --max-namespaces); a put registers it on every node.
func TestReadsOfAnUnknownNamespaceRegisterItNowhere(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ch := chunkOf(1, 1024)
	for _, n := range tc.nodes {
		c := testClientWith(t, client.Config{Conn: client.ConnConfig{Seeds: []string{n.addr}}, Namespace: "test/typo",
			Schema: client.Schema{Model: "m", TokensPerChunk: 16}, Logger: quietLogger()})
		if lr, err := c.Lookup(ctx, []client.ChunkID{ch.ID}, time.Minute); err != nil || lr.Held != 0 || !lr.NotRegistered {
			t.Fatalf("lookup via %s: %+v, %v; want nothing held, not registered", n.id, lr, err)
		}
		if res, err := c.Get(ctx, []client.ChunkID{ch.ID}); err != nil || res[0].Found {
			t.Fatalf("get via %s: %+v, %v; want a miss", n.id, res, err)
		}
	}
	for _, n := range tc.nodes {
		if rec := n.svc.Registry.Get("test/typo"); rec != nil {
			t.Fatalf("node %s registered the namespace a read named: %v", n.id, rec)
		}
	}
	c := testClient(t, tc.nodes[0].addr, 1, 1)
	if res, err := c.Put(ctx, []client.Chunk{ch}); err != nil || !res[0].Status.Held() {
		t.Fatalf("put: %+v, %v", res, err)
	}
	for _, n := range tc.nodes {
		if n.svc.Registry.Get("test/model") == nil {
			t.Fatalf("node %s did not learn the namespace a put registered", n.id)
		}
	}
}

// TestANodeKeepsItsNamespacesAcrossARestart: a namespace registered on a
// node is there again after the node restarts on its data directory, alone
// (no peer to learn it from): listed, read without registering again, and
// a dropped one stays dropped.
func TestANodeKeepsItsNamespacesAcrossARestart(t *testing.T) {
	t.Parallel()
	cfg := testNodeConfig(t)
	cfg.Registerer = prometheus.NewRegistry()
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ch := chunkOf(1, 1024)
	for _, ns := range []string{"keep/a", "drop/b"} {
		c := testClientWith(t, client.Config{Conn: client.ConnConfig{Seeds: []string{n.GRPCAddr()}}, Namespace: ns,
			Schema: client.Schema{Model: "m", TokensPerChunk: 16}, Logger: quietLogger()})
		if res, err := c.Put(ctx, []client.Chunk{ch}); err != nil || !res[0].Status.Held() {
			t.Fatalf("put to %s: %+v, %v", ns, res, err)
		}
		c.Close()
	}
	if _, err := n.DropNamespace("drop/b"); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}

	again := cfg
	again.Membership.GossipAddr = "127.0.0.1:0"
	n = startNode(t, again)
	var names []string
	for _, ns := range n.Namespaces() {
		names = append(names, ns.Name)
	}
	if !slices.Equal(names, []string{"keep/a"}) {
		t.Fatalf("namespaces after the restart: %v, want keep/a alone", names)
	}
	c := testClientWith(t, client.Config{Conn: client.ConnConfig{Seeds: []string{n.GRPCAddr()}}, Namespace: "keep/a",
		Schema: client.Schema{Model: "m", TokensPerChunk: 16}, Logger: quietLogger()})
	if res, err := c.Get(ctx, []client.ChunkID{ch.ID}); err != nil || !res[0].Found {
		t.Fatalf("get after the restart: %+v, %v; want the chunk (a warm restart keeps it)", res, err)
	}
}

// TestNamespacesListTheGroupSize: a grouped namespace is listed with its
// whole schema, the group size (ChunksPerGroup) and Extra included, as its
// client registered it.
func TestNamespacesListTheGroupSize(t *testing.T) {
	t.Parallel()
	cfg := testNodeConfig(t)
	cfg.Registerer = prometheus.NewRegistry()
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	want := client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16, Layout: "nhd", HashScheme: "sha256",
		TPRank: 1, TPSize: 2, ChunksPerGroup: 8, Extra: map[string]string{"k": "v"}}
	c := testClientWith(t, client.Config{Conn: client.ConnConfig{Seeds: []string{n.GRPCAddr()}}, Namespace: "grouped/a",
		Schema: want, Logger: quietLogger()})
	if _, err := c.Register(ctx); err != nil {
		t.Fatal(err)
	}
	list := n.Namespaces()
	if len(list) != 1 || list[0].Name != "grouped/a" {
		t.Fatalf("namespaces %+v, want grouped/a alone", list)
	}
	if got := list[0].Schema; !reflect.DeepEqual(got, want) {
		t.Fatalf("listed schema %+v, want %+v", got, want)
	}
}
