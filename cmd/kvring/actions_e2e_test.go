package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
)

// actionsEngine is a connected engine of namespace ns (R = 1).
func actionsEngine(t *testing.T, seeds []string, ns string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Conn: client.ConnConfig{Seeds: seeds}, Namespace: ns,
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, CallTimeout: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	testutil.Eventually(t, "the engine to connect", 30*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	return c
}

// TestAdminActionsDrainAndDropANamespace, on three real nodes:
//   - a drained node reports not ready and draining, `kvring members` shows it
//     draining, no new chunk lands on it while its chunks stay readable, and
//     undrain reverses it;
//   - `kvring namespaces` counts every chunk of each namespace;
//   - `kvring drop-namespace` frees exactly the dropped namespace's memory on
//     every node, its ids are no longer found, another namespace is untouched;
//   - refusals: a node started without --admin-actions refuses a drain with
//     the reason, and dropping an unknown namespace fails.
func TestAdminActionsDrainAndDropANamespace(t *testing.T) {
	t.Parallel()
	n1 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--admin-actions")
	n2 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--admin-actions", "--join", n1.gossip)
	n3 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--admin-actions", "--join", n1.gossip)
	nodes := []*e2eNode{n1, n2, n3}
	testutil.Eventually(t, "three active members", 30*time.Second, func() bool {
		r := runCLI(t, nil, "members", "--admin", n1.admin)
		return r.code == 0 && strings.Count(r.stdout, " active ") == 3
	})
	a := actionsEngine(t, []string{n1.grpc}, "act/a")
	b := actionsEngine(t, []string{n1.grpc}, "act/b")
	put := func(c *client.Client, from, n int) []client.Chunk {
		t.Helper()
		var chunks []client.Chunk
		for i := range n {
			chunks = append(chunks, e2eChunk(uint64(from+i), 8<<10))
		}
		res, err := c.Put(context.Background(), chunks)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Status != client.Stored {
				t.Fatalf("put %d: %+v", i, r)
			}
		}
		return chunks
	}
	aChunks := put(a, 0, 60)
	bChunks := put(b, 1000, 30)

	// Drain n2.
	mustCLI(t, nil, "drain", "--admin", n2.admin)
	var rd struct {
		Ready, Draining bool
	}
	if code, err := getJSON(n2.admin, "/readyz", &rd); err != nil || code != 503 || rd.Ready || !rd.Draining {
		t.Fatalf("/readyz of the drained node: %d %+v %v", code, rd, err)
	}
	testutil.Eventually(t, "n1 to see n2 draining", 15*time.Second, func() bool {
		r := runCLI(t, nil, "members", "--admin", n1.admin)
		return r.code == 0 && strings.Contains(lineContaining(r.stdout, n2.id), "draining")
	})
	res, err := a.Put(context.Background(), func() []client.Chunk {
		var cs []client.Chunk
		for i := range 60 {
			cs = append(cs, e2eChunk(uint64(500+i), 8<<10))
		}
		return cs
	}())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != client.Stored || len(r.Holders) != 1 || r.Holders[0].ID == n2.id {
			t.Fatalf("put %d while n2 drains: %+v", i, r)
		}
	}
	// The drained node hands everything it holds to the next owners.
	testutil.Eventually(t, "the drained node to hand off its chunks", 30*time.Second, func() bool {
		return n2.stats(t).Chunks == 0 && totalChunks(t, nodes...) == 150
	})
	checkHeld(t, a, aChunks)
	mustCLI(t, nil, "undrain", "--admin", n2.admin)
	if code, err := getJSON(n2.admin, "/readyz", &rd); err != nil || code != 200 || rd.Draining {
		t.Fatalf("/readyz after undrain: %d %+v %v", code, rd, err)
	}
	// Undrained, it owns partitions again and is handed their chunks back.
	testutil.Eventually(t, "the chunks to come back to the undrained node", 30*time.Second, func() bool {
		for _, n := range nodes {
			if !handoffIdle(n) {
				return false
			}
		}
		return n2.stats(t).Chunks > 0 && totalChunks(t, nodes...) == 150
	})
	// Namespaces, then drop act/a everywhere.
	list := mustCLI(t, nil, "namespaces", "--admin", n1.admin)
	if !strings.Contains(lineContaining(list.stdout, "act/a"), " 120 ") || !strings.Contains(lineContaining(list.stdout, "act/b"), " 30 ") {
		t.Fatalf("kvring namespaces, want 120 chunks of act/a and 30 of act/b:\n%s", list.stdout)
	}
	before := map[string]int64{}
	for _, n := range nodes {
		before[n.id] = n.stats(t).UsedBytes
	}
	r := mustCLI(t, nil, "drop-namespace", "act/a", "--admin", n1.admin, "--json")
	var drops []struct {
		Node         string
		Chunks       int64
		Bytes        int64
		PinnedChunks int64 `json:"pinned_chunks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &drops); err != nil || len(drops) != 3 {
		t.Fatalf("drop-namespace --json: %v %s", err, r.stdout)
	}
	var chunks int64
	for _, d := range drops {
		var n *e2eNode
		for _, x := range nodes {
			if x.id == d.Node {
				n = x
			}
		}
		if n == nil {
			t.Fatalf("a drop from unknown node %s", d.Node)
		}
		if after := n.stats(t).UsedBytes; before[n.id]-after != d.Bytes {
			t.Fatalf("node %s: used bytes fell by %d, the drop says %d", n.id, before[n.id]-after, d.Bytes)
		}
		chunks += d.Chunks
	}
	if chunks != 120 {
		t.Fatalf("%d chunks freed, want the 120 of act/a", chunks)
	}
	ids := make([]client.ChunkID, len(aChunks))
	for i := range aChunks {
		ids[i] = aChunks[i].ID
	}
	if lr, err := a.Lookup(context.Background(), ids, 0); err != nil || lr.Held != 0 {
		t.Fatalf("lookup of the dropped namespace's ids: %+v %v (the engine registers again and finds nothing)", lr, err)
	}
	checkHeld(t, b, bChunks)
	r = runCLI(t, nil, "drop-namespace", "act/nobody", "--admin", n1.admin)
	if r.code == 0 || !strings.Contains(r.stderr, "not registered") {
		t.Fatalf("drop of an unknown namespace: %v", r)
	}
}

// TestForgetAKilledMemberRebuildsTheRingsAtOnce: forgetting a live member is
// refused with the reason; once it is SIGKILLed, `kvring forget` takes it
// off every other member's ring before the command returns (gossip would
// take seconds), `kvring members` shows it forgotten (not "active dead"),
// and the member owns partitions again, active, after it restarts.
func TestForgetAKilledMemberRebuildsTheRingsAtOnce(t *testing.T) {
	t.Parallel()
	n1 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--admin-actions")
	n2 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--admin-actions", "--join", n1.gossip)
	n3 := startNode(t, t.TempDir(), shmDir(t), "127.0.0.1:0", "127.0.0.1:0", "--admin-actions", "--join", n1.gossip)
	ringMember := func(n *e2eNode, id string) bool {
		var info struct {
			Members []struct {
				ID         string `json:"id"`
				RingMember bool   `json:"ring_member"`
			} `json:"members"`
		}
		if code, err := getJSON(n.admin, "/v1/cluster", &info); err != nil || code != 200 {
			t.Fatalf("GET /v1/cluster of %s: %d %v", n.id, code, err)
		}
		for _, m := range info.Members {
			if m.ID == id {
				return m.RingMember
			}
		}
		return false
	}
	testutil.Eventually(t, "n2 on every ring", 30*time.Second, func() bool {
		return ringMember(n1, n2.id) && ringMember(n3, n2.id)
	})
	r := runCLI(t, nil, "forget", n2.id, "--admin", n1.admin)
	if r.code == 0 || !strings.Contains(r.stderr, "it is alive") {
		t.Fatalf("forget of a live member: %v", r)
	}
	n2.kill(t)
	mustCLI(t, nil, "forget", n2.id, "--admin", n1.admin)
	if ringMember(n1, n2.id) || ringMember(n3, n2.id) {
		t.Fatal("the killed member is still on a ring after forget returned")
	}
	for _, n := range []*e2eNode{n1, n3} {
		if row := memberRow(t, n, n2.id); !strings.HasPrefix(row, n2.id+"  forgotten  ") {
			t.Fatalf("kvring members at %s lists the forgotten member as %q, want the state forgotten", n.id, row)
		}
	}
	n2 = restartNode(t, n2, "--admin-actions", "--join", n1.gossip)
	testutil.Eventually(t, "the restarted member back on every ring", 30*time.Second, func() bool {
		return ringMember(n1, n2.id) && ringMember(n3, n2.id)
	})
	if row := memberRow(t, n1, n2.id); !strings.Contains(row, "  active  ") {
		t.Fatalf("kvring members lists the member that joined again as %q, want active", row)
	}
}

// memberRow is the row of member id in `kvring members` at node n, its
// columns separated by single double spaces.
func memberRow(t *testing.T, n *e2eNode, id string) string {
	t.Helper()
	out := mustCLI(t, nil, "members", "--admin", n.admin).stdout
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, id+" ") {
			return strings.Join(strings.Fields(line), "  ")
		}
	}
	t.Fatalf("kvring members at %s does not list %s:\n%s", n.id, id, out)
	return ""
}
