package node

import (
	"bytes"
	"context"
	"testing"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/ring"
)

// TestChunksStoredUnderTheFormerRingAreFoundAfterAChange: chunks stored while
// a node was out of the ring (on the nodes that owned them then) are counted
// by lookups and returned by gets right after the node is back, while the ring
// is unsettled; without that, lookups stop at the first such chunk.
func TestChunksStoredUnderTheFormerRingAreFoundAfterAChange(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 64<<20)
	full := tc.Ring()
	cfg := full.Config()
	var without []ring.Member
	for _, m := range full.Members() {
		if m.ID != tc.nodes[2].id {
			without = append(without, m)
		}
	}
	r2, err := ring.New(without, full.Epoch()+1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tc.Store(r2) // node 2 is out: its chunks go to nodes 0 and 1

	// Unrouted clients: each call is coordinated by the node it names.
	via := func(nd *testNode) *client.Client {
		return testClientWith(t, client.Config{
			Conn:      client.ConnConfig{Seeds: []string{nd.addr}},
			Namespace: "test/model", Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16},
			ReplicationFactor: 1, MinReplicas: 1, DisableRouting: true, Logger: quietLogger(),
		})
	}
	c := via(tc.nodes[0])
	ctx := context.Background()
	var chunks []client.Chunk
	ids := make([]client.ChunkID, 64)
	for i := range ids {
		chunks = append(chunks, chunkOf(uint64(5000+i), 4096))
		ids[i] = chunks[i].ID
	}
	res, err := c.Put(ctx, chunks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != client.Stored || r.Holders[0].ID == tc.nodes[2].id {
			t.Fatalf("chunk %d: %+v, want stored on node 0 or 1", i, r)
		}
	}

	// Node 2 is back; the ring just changed.
	r3, err := ring.New(full.Members(), full.Epoch()+2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tc.SetUnsettled(true)
	tc.Store(r3)
	for _, nd := range tc.nodes {
		c := via(nd)
		lr, err := c.Lookup(ctx, ids, 0)
		if err != nil {
			t.Fatal(err)
		}
		if lr.Held != len(ids) {
			t.Fatalf("lookup via %s after the change: %d of %d held", nd.id, lr.Held, len(ids))
		}
		got, err := c.Get(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			if !g.Found || !bytes.Equal(g.Data, chunks[i].Data) {
				t.Fatalf("get via %s: chunk %d found=%v reason=%q", nd.id, i, g.Found, g.Reason)
			}
		}
	}
	// With pins, the lease covers the chunks on the former owners too.
	lr, err := c.Lookup(ctx, ids, 30_000_000_000)
	if err != nil || lr.Held != len(ids) {
		t.Fatalf("pinned lookup: %+v %v", lr, err)
	}

	// The premise: once the ring has settled, node 2's share is not found
	// where the current ring looks.
	tc.SetUnsettled(false)
	lr, err = c.Lookup(ctx, ids, 0)
	if err != nil {
		t.Fatal(err)
	}
	if lr.Held == len(ids) {
		t.Fatal("every chunk is found without the previous ring: the test proves nothing")
	}
}
