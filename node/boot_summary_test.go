package node

import (
	"context"
	"testing"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/node/internal/moves"
)

// TestARestartedNodeGossipsWhatItsCatalogHoldsFromTheStart: a node started
// again on its data directory gossips, from its first metadata on, the
// partitions its catalog holds chunks of, not "may hold anything": readers
// ask it about those partitions only, before its first hand-off pass.
func TestARestartedNodeGossipsWhatItsCatalogHoldsFromTheStart(t *testing.T) {
	t.Parallel()
	cfg := testNodeConfig(t)
	first := startNode(t, cfg)
	c := testClient(t, first.GRPCAddr(), 1, 1)
	var chunks []client.Chunk
	for i := range 20 {
		chunks = append(chunks, chunkOf(uint64(700+i), 1024))
	}
	if _, err := c.Put(context.Background(), chunks); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	again := startNode(t, cfg) // its first pass waits for the ring to be quiet for a second
	var self *moves.Summary
	for _, m := range again.Members() {
		if m.ID == again.NodeID() {
			self = m.Moves
		}
	}
	if self == nil || self.All {
		t.Fatalf("right after its start the node gossips %+v, want the partitions of its catalog", self)
	}
	rg := again.Ring()
	for i, ch := range chunks {
		if p := rg.Partition("test/model", ch.ID[:]); !self.Contains(p) {
			t.Fatalf("chunk %d's partition %d is not named", i, p)
		}
	}
}
