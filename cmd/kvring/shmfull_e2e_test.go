package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
)

// TestANodeOnATooSmallShmFilesystem: the probe that crashed the node with
// SIGBUS. On a 16 MiB tmpfs a node with a 256 MiB limit refuses to start,
// naming both sizes; with --shm-overcommit it starts, stores what fits,
// answers the rest "rejected" with the reason, keeps serving reads of what
// it stored, and survives a restart on the full filesystem.
func TestANodeOnATooSmallShmFilesystem(t *testing.T) {
	t.Parallel()
	shm := testutil.MountTmpfs(t, "16m")
	data := t.TempDir()
	r := runCLI(t, nil, serveArgs(data, shm, "127.0.0.1:0", "127.0.0.1:0")...)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	last := lines[len(lines)-1]
	for _, want := range []string{"cannot start node", "268435456", "16777216", shm, "--shm-overcommit"} {
		if r.code == 0 || !strings.Contains(last, want) {
			t.Fatalf("serve on a 16 MiB tmpfs with a 256 MiB limit: want an exit whose last line names %q: %v", want, r)
		}
	}

	n := startNode(t, data, shm, "127.0.0.1:0", "127.0.0.1:0", "--shm-overcommit")
	c := e2eClient(t, n.grpc)
	var stored []client.Chunk
	rejected := 0
	for i := range 40 { // 40 MiB into 16
		ch := mibChunk(i)
		res, err := c.Put(context.Background(), []client.Chunk{ch})
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		switch res[0].Status {
		case client.Stored:
			stored = append(stored, ch)
		case client.Rejected:
			rejected++
			if !strings.Contains(res[0].Reason, "space") {
				t.Fatalf("put %d rejected for %q, want a reason naming the space", i, res[0].Reason)
			}
		default:
			t.Fatalf("put %d: %+v", i, res[0])
		}
	}
	if len(stored) == 0 || rejected == 0 {
		t.Fatalf("%d stored, %d rejected: want some of each", len(stored), rejected)
	}
	checkHeld(t, c, stored)
	n.kill(t)
	n = restartNode(t, n, "--shm-overcommit")
	c = e2eClient(t, n.grpc)
	checkHeld(t, c, stored)
	if res, err := c.Put(context.Background(), []client.Chunk{mibChunk(99)}); err != nil || res[0].Status == client.Failed {
		t.Fatalf("a put after the restart on a full filesystem: %v %+v", err, res)
	}
}

// mibChunk is a 1 MiB chunk whose bytes and id derive from i.
func mibChunk(i int) client.Chunk {
	id := client.ChunkID(sha256.Sum256(fmt.Appendf(nil, "shm-full-%d", i)))
	return client.Chunk{ID: id, Data: bytes.Repeat(id[:], (1<<20)/32)}
}

// e2eClient is a connected client of namespace "shm/full".
func e2eClient(t *testing.T, addr string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Conn: client.ConnConfig{Seeds: []string{addr}}, Namespace: "shm/full",
		Schema: client.Schema{Model: "m", TokensPerChunk: 16}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	testutil.Eventually(t, "the client to connect", 30*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	return c
}

// checkHeld reads chunks back byte-exact.
func checkHeld(t *testing.T, c *client.Client, chunks []client.Chunk) {
	t.Helper()
	ids := make([]client.ChunkID, len(chunks))
	for i := range chunks {
		ids[i] = chunks[i].ID
	}
	got, err := c.Get(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !g.Found || !bytes.Equal(g.Data, chunks[i].Data) {
			t.Fatalf("chunk %d of %d: found %v (%s)", i, len(chunks), g.Found, g.Reason)
		}
	}
}
