package node

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/store"
)

// TestAdminActionsAreOffWithoutATokenOrTheSetting: a node without an admin
// token and without AdminActions refuses every write action with the
// reason (403) and counts the refusal; reads still work.
func TestAdminActionsAreOffWithoutATokenOrTheSetting(t *testing.T) {
	t.Parallel()
	n := startNode(t, testNodeConfig(t))
	admin := n.AdminAddr()
	for _, path := range []string{"/v1/drain", "/v1/undrain"} {
		var e struct{ Error string }
		if code, _ := adminGet(t, admin, "POST", path, &e); code != 403 || !strings.Contains(e.Error, "--admin-actions") {
			t.Fatalf("POST %s: %d %q, want 403 naming --admin-actions", path, code, e.Error)
		}
	}
	var e struct{ Error string }
	if code, _ := adminGet(t, admin, "DELETE", "/v1/namespaces/x", &e); code != 403 {
		t.Fatalf("DELETE a namespace: %d %q", code, e.Error)
	}
	if code, _ := adminGet(t, admin, "GET", "/v1/cluster", nil); code != 200 {
		t.Fatalf("GET /v1/cluster: %d", code)
	}
	_, body := httpGet(t, "http://"+admin+"/metrics")
	if !strings.Contains(body, `kvring_admin_actions_total{action="drain",result="refused"} 1`) {
		t.Fatal("the refused drain is not counted")
	}
}

// TestEvictOneChunk: evict removes one held chunk of a registered
// namespace; an unknown chunk is 404, a malformed id 400.
func TestEvictOneChunk(t *testing.T) {
	t.Parallel()
	cfg := testNodeConfig(t)
	cfg.AdminActions = true
	n := startNode(t, cfg)
	c := testClient(t, n.GRPCAddr(), 1, 1)
	ch := chunkOf(7, 1000)
	if res, err := c.Put(context.Background(), []client.Chunk{ch}); err != nil || res[0].Status != client.Stored {
		t.Fatalf("put: %v %+v", err, res)
	}
	fp, err := c.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	admin, path := n.AdminAddr(), "/v1/namespaces/test%2Fmodel/chunks/"
	if code, _ := adminGet(t, admin, "DELETE", path+hex.EncodeToString(ch.ID[:]), nil); code != 200 {
		t.Fatalf("evict: %d", code)
	}
	if n.Store().Contains(namespace.StoreName("test/model", fp), store.ID(ch.ID)) {
		t.Fatal("the chunk is still held")
	}
	if code, _ := adminGet(t, admin, "DELETE", path+hex.EncodeToString(ch.ID[:]), nil); code != 404 {
		t.Fatalf("evict of a chunk not held: %d, want 404", code)
	}
	if code, _ := adminGet(t, admin, "DELETE", path+"xyz", nil); code != 400 {
		t.Fatalf("evict of a malformed id: %d, want 400", code)
	}
}
