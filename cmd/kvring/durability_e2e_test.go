package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
)

// TestChunksReportedStoredSurviveAKillRightAfterTheAck: a node killed
// (SIGKILL) the moment its last put returns serves every chunk it reported
// stored after a warm restart; nothing acknowledged waits in memory for a
// later catalog write.
func TestChunksReportedStoredSurviveAKillRightAfterTheAck(t *testing.T) {
	t.Parallel()
	data, shm := t.TempDir(), shmDir(t)
	n := startNode(t, data, shm, "127.0.0.1:0", "127.0.0.1:0")
	c, _ := newEngine(t, []string{n.grpc}, 0, 0)
	ctx := context.Background()
	testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })

	var stored []client.Chunk
	for batch := range 20 {
		var chunks []client.Chunk
		for i := range 16 {
			chunks = append(chunks, e2eChunk(uint64(batch*100+i), 4096+batch*16+i))
		}
		res, err := c.Put(ctx, chunks)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Status != client.Stored {
				t.Fatalf("batch %d chunk %d: %+v", batch, i, r)
			}
		}
		stored = append(stored, chunks...)
	}
	n.kill(t) // right after the last acknowledgement

	restartNode(t, n)
	testutil.Eventually(t, "the client to reconnect", 15*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	if lost := countLost(ctx, t, c, stored); lost > 0 {
		t.Fatalf("%d of %d chunks reported stored are gone after the restart", lost, len(stored))
	}
}

// countLost reads stored back through c and counts the chunks that are
// missing or differ.
func countLost(ctx context.Context, t *testing.T, c *client.Client, stored []client.Chunk) int {
	t.Helper()
	ids := make([]client.ChunkID, len(stored))
	for i, ch := range stored {
		ids[i] = ch.ID
	}
	got, err := c.Get(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for i, g := range got {
		if !g.Found || !bytes.Equal(g.Data, stored[i].Data) {
			lost++
		}
	}
	return lost
}
