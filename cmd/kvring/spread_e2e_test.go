package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node"
)

// TestAHotSystemPromptIsServedByItsSpreadSet: real processes with
// hot-group spreading set low (a group looked up 4 times in 10 s is spread
// to 4 members). A prompt's group looked up by an engine becomes hot, its
// primary owner copies it to 3 more nodes, the engine's later lookups are
// coordinated by several nodes instead of the owner alone, every lookup
// counts every chunk and every get returns the bytes; the hand-off passes
// that run meanwhile leave the spread copies in place.
func TestAHotSystemPromptIsServedByItsSpreadSet(t *testing.T) {
	t.Parallel()
	nodes := startHandoffCluster(t, 5, "--spread-threshold", "4", "--spread-width", "4", "--spread-ttl", "1m")
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.grpc)
	}
	c, err := client.New(client.Config{
		Conn:        client.ConnConfig{Seeds: seeds},
		Namespace:   "e2e/spread",
		Schema:      client.Schema{Model: "llama-8b", Dtype: "bf16", TokensPerChunk: 16, ChunksPerGroup: 8},
		CallTimeout: 10 * time.Second,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	chunks := make([]client.Chunk, 8)
	ids := make([]client.ChunkID, len(chunks))
	for i := range chunks {
		chunks[i] = e2eChunk(uint64(9000+i), 32<<10)
		ids[i] = chunks[i].ID
	}
	for i, g := range client.GroupKeys(ids, 8) {
		chunks[i].Group = g
	}
	testutil.Eventually(t, "the engine to connect", 20*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	putAll(t, c, chunks, 1)

	lookupAll := func(n int) {
		t.Helper()
		for range n {
			lr, err := c.Lookup(context.Background(), ids, 0)
			if err != nil || lr.Held != len(ids) {
				t.Fatalf("lookup: %+v %v, want all %d held", lr, err, len(ids))
			}
		}
	}
	lookupAll(4)
	sum := func(name string) (total float64, per []float64) {
		for _, n := range nodes {
			v, _ := metricValue(t, n, name)
			total += v
			per = append(per, v)
		}
		return total, per
	}
	testutil.Eventually(t, "the hot group to be copied to 3 more nodes", 20*time.Second, func() bool {
		copied, _ := sum("kvring_spread_copied_chunks_total")
		return copied >= 3*8
	})
	if held := totalChunks(t, nodes...); held < 4*8 {
		t.Fatalf("the nodes hold %d chunks, want the group on 4 of them", held)
	}

	passes := func() (n int) {
		for _, nd := range nodes {
			var st node.HandoffStatus
			if code, err := getJSON(nd.admin, "/v1/handoff", &st); err == nil && code == 200 {
				n += int(st.Passes)
			}
		}
		return n
	}
	before := passes()
	lookupAll(1) // the engine learns that the group is spread
	_, start := sum("kvring_lookups_total")
	lookupAll(100)
	_, end := sum("kvring_lookups_total")
	coordinators := 0
	for i := range end {
		if end[i] > start[i] {
			coordinators++
		}
	}
	if coordinators < 3 {
		t.Fatalf("100 lookups of the hot group were coordinated by %d nodes (before %v, after %v), want the spread set's 4 sharing them",
			coordinators, start, end)
	}
	got, err := c.Get(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !g.Found || string(g.Data) != string(chunks[i].Data) {
			t.Fatalf("get %d: found %v (%s)", i, g.Found, g.Reason)
		}
	}
	testutil.Eventually(t, "two more hand-off passes on every node", 30*time.Second, func() bool { return passes() >= before+2*len(nodes) })
	if held := totalChunks(t, nodes...); held < 4*8 {
		t.Fatalf("after hand-off passes the nodes hold %d chunks, want the spread copies kept (%d)", held, 4*8)
	}
}
