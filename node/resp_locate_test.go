package node

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestLocateShowsWhereARESPKeyIsHeld: GET /v1/resp/locate maps a key as the
// port does and names this node as the holder of a key SET through it; a
// key of a namespace nothing was written to is not registered, a request
// without a key is refused (400), and a node without the port answers 404.
func TestLocateShowsWhereARESPKeyIsHeld(t *testing.T) {
	t.Parallel()
	n := startAdminTestNode(t, t.TempDir(), testShmDir(t), func(c *Config) { c.RESP.Addr = "127.0.0.1:0" })
	admin := n.AdminAddr()
	c := redis.NewClient(&redis.Options{Addr: n.RESPAddr(), MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	const key = "m@1@0@abc1@bfloat16kv_bytes"
	if err := c.Set(ctx, key, "bytes", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var loc RESPLocation
	path := "/v1/resp/locate?" + url.Values{"key": {key, "other@1@0@abc2@bfloat16metadata"}}.Encode()
	if code, _ := adminGet(t, admin, "GET", path, &loc); code != 200 || len(loc.Keys) != 2 {
		t.Fatalf("GET %s = %d %+v", path, code, loc)
	}
	k := loc.Keys[0]
	if k.Key != key || k.Namespace != "resp:m:1:0:bfloat16" || len(k.ID) != 64 || !slices.Equal(k.Holders, []string{n.NodeID()}) ||
		!slices.Equal(k.Owners, []string{n.NodeID()}) || k.NotRegistered || loc.ClusterMode {
		t.Fatalf("the key SET through the port: %+v, want held and owned by %s", k, n.NodeID())
	}
	if o := loc.Keys[1]; !o.NotRegistered || len(o.Holders) != 0 {
		t.Fatalf("a key of a namespace nothing was written to: %+v", o)
	}
	var e struct{ Error string }
	if code, _ := adminGet(t, admin, "GET", "/v1/resp/locate", &e); code != 400 || !strings.Contains(e.Error, "key") {
		t.Fatalf("locate without a key = %d %q, want 400", code, e.Error)
	}
	off := startAdminTestNode(t, t.TempDir(), testShmDir(t))
	if code, _ := adminGet(t, off.AdminAddr(), "GET", "/v1/resp/locate?key=a", &e); code != 404 || !strings.Contains(e.Error, "--resp-addr") {
		t.Fatalf("locate on a node without the port = %d %q, want 404", code, e.Error)
	}
}
