package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/ring"
)

// TestAGetMissNamesEachNodeOnceAndTheDepartedOwner: a chunk whose only
// holder died and left the ring is a miss whose reason names every member
// asked once (while the ring is unsettled the owners are asked twice) and
// the departed owner that could not be asked, not a node twice and the
// holder never.
func TestAGetMissNamesEachNodeOnceAndTheDepartedOwner(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	c := testClientWith(t, client.Config{Conn: client.ConnConfig{Seeds: []string{tc.nodes[0].addr}}, Namespace: "test/model",
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, ReplicationFactor: 1, MinReplicas: 1,
		DisableRouting: true, Logger: quietLogger()})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	holder := tc.nodes[2]
	var lost client.Chunk
	for i := uint64(0); lost.Data == nil; i++ {
		ch := chunkOf(i, 1024)
		res, err := c.Put(ctx, []client.Chunk{ch})
		if err != nil || !res[0].Status.Held() {
			t.Fatalf("put: %v %+v", err, res)
		}
		if res[0].Holders[0].ID == holder.id {
			lost = ch
		}
	}
	holder.stop()
	var rest []ring.Member
	for _, m := range tc.Ring().Members() {
		if m.ID != holder.id {
			rest = append(rest, m)
		}
	}
	tc.useMembers(t, rest) // gossip declared it dead
	tc.SetUnsettled(true)
	res, err := c.Get(ctx, []client.ChunkID{lost.ID})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Found {
		t.Fatal("found a chunk whose only holder is gone")
	}
	why := res[0].Reason
	for _, n := range tc.nodes[:2] {
		if strings.Count(why, "node "+n.id+":") != 1 {
			t.Errorf("the reason names node %s %d times, want once: %s", n.id, strings.Count(why, "node "+n.id), why)
		}
	}
	if !strings.Contains(why, "node "+holder.id+": an owner until it left the ring") || !strings.Contains(why, "not asked") {
		t.Errorf("the reason does not name the departed owner %s: %s", holder.id, why)
	}
}
