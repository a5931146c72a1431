package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
)

// TestReadinessFollowsStoreHealth: when the segment files under a running
// node are deleted (chunks acknowledged into them would not survive a
// restart), the node stops reporting ready, says why on /readyz, and its
// metrics show the store unhealthy and the lost segment.
func TestReadinessFollowsStoreHealth(t *testing.T) {
	t.Parallel()
	cfg := testNodeConfig(t)
	cfg.Store.MaintenanceInterval = 20 * time.Millisecond // the background segment check
	n := startNode(t, cfg)
	c := testClient(t, n.GRPCAddr(), 1, 1)
	if res, err := c.Put(context.Background(), []client.Chunk{chunkOf(1, 4096)}); err != nil || res[0].Status != client.Stored {
		t.Fatalf("put: %v %+v", err, res)
	}
	admin := n.AdminAddr()
	var rd Readiness
	if code, _ := adminGet(t, admin, "GET", "/readyz", &rd); code != 200 || !rd.StoreHealthy {
		t.Fatalf("/readyz before = %d %+v", code, rd)
	}
	segs, err := filepath.Glob(filepath.Join(cfg.Store.ShmDir, "kvring-*", "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment files in %s: %v", cfg.Store.ShmDir, err)
	}
	for _, s := range segs {
		if err := os.Remove(s); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "/readyz to report the store unhealthy", func() bool {
		code, _ := adminGet(t, admin, "GET", "/readyz", &rd)
		return code == 503 && !rd.Ready && !rd.StoreHealthy && strings.Contains(rd.StoreError, "deleted or truncated")
	})
	_, body := httpGet(t, "http://"+admin+"/metrics")
	for _, want := range []string{"kvring_store_healthy 0", "kvring_store_segments_lost_total 1", "kvring_catalog_errors_total 0"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
