package node

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvring/kvring/client"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// TestTheLeasesOfAClientThatGoesAreReleased: a lookup lease used to pin its
// chunks until it expired or was released, also after its client had gone:
// a hoarder's 5-minute leases kept 96 MiB pinned after it left, and the
// next client's puts found no room. Now when a client's last connection to
// the coordinator that granted its leases closes, the coordinator unpins
// them on every owner they pin (here on either node of a replicated
// namespace), while another client's leases stay.
func TestTheLeasesOfAClientThatGoesAreReleased(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 2, 16<<20) // leases of up to a minute
	nd := tc.nodes[0]
	writer := testClient(t, nd.addr, 2, 2)
	ctx := context.Background()
	fp, err := writer.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids [][]byte
	var kept []client.ChunkID
	for i := range 20 {
		ch := chunkOf(uint64(7000+i), 64<<10)
		if res, err := writer.Put(ctx, []client.Chunk{ch}); err != nil || res[0].Status != client.Stored {
			t.Fatalf("put %d: %v %+v", i, err, res)
		}
		if i < 10 {
			ids = append(ids, ch.ID[:])
		} else {
			kept = append(kept, ch.ID)
		}
	}
	keeper := testClient(t, nd.addr, 2, 2)
	if lr, err := keeper.Lookup(ctx, kept, time.Minute); err != nil || lr.Held != 10 || lr.Lease == 0 {
		t.Fatalf("the keeper's pinning lookup: %+v %v", lr, err)
	}
	pinnedBefore := []int64{tc.nodes[0].st.Stats().PinnedChunks, tc.nodes[1].st.Stats().PinnedChunks}
	cc, err := grpc.NewClient(nd.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := kvringv1.NewCacheClient(cc).Lookup(ctx, &kvringv1.LookupRequest{
		Namespace: &kvringv1.NamespaceRef{Name: "test/model", Fingerprint: fp}, Ids: ids, PinTtlMs: 60_000})
	if err != nil || resp.GetHeld() != 10 || resp.GetLeaseId() == 0 {
		t.Fatalf("the hoarder's pinning lookup: %v %v", resp, err)
	}
	// A lease pins each chunk on the holder the lookup asked first (one of
	// the two owners, not necessarily the same one for every group).
	var added int64
	for i, n := range tc.nodes {
		added += n.st.Stats().PinnedChunks - pinnedBefore[i]
	}
	if added != 10 {
		t.Fatalf("the hoarder's lease pins %d chunks over the nodes, want its 10", added)
	}
	cc.Close() // the hoarder goes without releasing its lease
	for i, n := range tc.nodes {
		waitFor(t, "the departed client's pins to end", func() bool { return n.st.Stats().PinnedChunks == pinnedBefore[i] })
	}
	if lr, err := keeper.Lookup(ctx, kept, 0); err != nil || lr.Held != 10 {
		t.Fatalf("the keeper's chunks after the hoarder left: %+v %v", lr, err)
	}
	for i, n := range tc.nodes {
		if got := n.st.Stats().PinnedChunks; got != pinnedBefore[i] {
			t.Fatalf("node %d pins %d chunks once the hoarder left, want the keeper's %d", i, got, pinnedBefore[i])
		}
	}
}
