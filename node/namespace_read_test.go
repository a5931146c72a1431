package node

import (
	"context"
	"testing"
	"time"

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
		if rec := n.svc.reg.Get("test/typo"); rec != nil {
			t.Fatalf("node %s registered the namespace a read named: %v", n.id, rec)
		}
	}
	c := testClient(t, tc.nodes[0].addr, 1, 1)
	if res, err := c.Put(ctx, []client.Chunk{ch}); err != nil || !res[0].Status.Held() {
		t.Fatalf("put: %+v, %v", res, err)
	}
	for _, n := range tc.nodes {
		if n.svc.reg.Get("test/model") == nil {
			t.Fatalf("node %s did not learn the namespace a put registered", n.id)
		}
	}
}
