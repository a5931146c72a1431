package node

import (
	"context"
	"testing"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/node/internal/namespace"
)

// TestNamespaceMetricsFollowWhatTheNodeHoldsAndCounts: each registered
// namespace's bytes, chunks, evictions, hits and misses are exported with
// its name as the label, as the node's store counts them: a namespace that
// wrote more than the node's memory shows evictions, and a lookup's held and
// missing ids show as hits and misses.
func TestNamespaceMetricsFollowWhatTheNodeHoldsAndCounts(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 1, 4<<20)
	nd := tc.nodes[0]
	c := testClient(t, nd.addr, 1, 1)
	ctx := context.Background()
	var ids []client.ChunkID
	for i := range 40 { // 10 MiB into 4 MiB
		ch := chunkOf(uint64(9100+i), 256<<10)
		if _, err := c.Put(ctx, []client.Chunk{ch}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ch.ID)
	}
	if _, err := c.Lookup(ctx, ids[len(ids)-4:], 0); err != nil { // the latest: held
		t.Fatal(err)
	}
	if _, err := c.Lookup(ctx, ids[:1], 0); err != nil { // the first: evicted
		t.Fatal(err)
	}
	rec := nd.svc.Registry.Get("test/model")
	if rec == nil {
		t.Fatal("test/model is not registered")
	}
	want := nd.st.NamespaceStats()[namespace.StoreName("test/model", rec.GetFingerprint())]
	if want.Evictions == 0 || want.Hits == 0 || want.Misses == 0 || want.Chunks == 0 {
		t.Fatalf("the store counted %+v: want evictions, hits, misses and chunks", want)
	}
	s := scrape(t, nd.reg)
	for name, v := range map[string]float64{
		"kvring_namespace_bytes":           float64(want.Bytes),
		"kvring_namespace_chunks":          float64(want.Chunks),
		"kvring_namespace_evictions_total": float64(want.Evictions),
		"kvring_namespace_hits_total":      float64(want.Hits),
		"kvring_namespace_misses_total":    float64(want.Misses),
	} {
		if got := s.get(t, name+`{namespace="test/model"}`); got != v {
			t.Errorf("%s = %v, want the store's %v", name, got, v)
		}
	}
}
