package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
)

// TestNothingReportedStoredIsLostWhenTheCatalogDiskIsFull: with the data
// directory's filesystem full, a node must not answer `stored` for a chunk
// whose catalog record it cannot write. 300 puts used to be all answered
// stored while kvring_catalog_errors_total rose, and after SIGKILL and a
// restart 280 were gone. Now the puts that cannot be recorded fail, and
// every put answered stored is served after the restart.
func TestNothingReportedStoredIsLostWhenTheCatalogDiskIsFull(t *testing.T) {
	t.Parallel()
	data := testutil.MountTmpfs(t, "1m")
	n := startNode(t, data, shmDir(t), "127.0.0.1:0", "127.0.0.1:0")
	c, _ := newEngine(t, []string{n.grpc}, 0, 0)
	ctx := context.Background()
	testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	if res, err := c.Put(ctx, []client.Chunk{e2eChunk(999999, 4096)}); err != nil || res[0].Status != client.Stored {
		t.Fatalf("a put before the disk filled up: %v %+v", err, res)
	}
	ballast := filepath.Join(data, "ballast")
	testutil.FillFile(t, ballast, math.MaxInt64)

	var stored []client.Chunk
	failed := 0
	for batch := range 30 {
		var chunks []client.Chunk
		for i := range 10 {
			chunks = append(chunks, e2eChunk(uint64(batch*10+i), 4096))
		}
		res, err := c.Put(ctx, chunks)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			switch r.Status {
			case client.Stored:
				stored = append(stored, chunks[i])
			default:
				failed++
			}
		}
	}
	t.Logf("with the catalog's filesystem full: %d of 300 puts stored, %d not", len(stored), failed)
	if failed == 0 {
		t.Fatal("every put was answered stored on a full filesystem; the test needs catalog writes to fail")
	}
	n.kill(t)
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	restartNode(t, n)
	testutil.Eventually(t, "the client to reconnect", 15*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	if lost := countLost(ctx, t, c, stored); lost > 0 {
		t.Fatalf("%d of %d chunks reported stored are gone after SIGKILL and a restart", lost, len(stored))
	}
}
