package coord_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/kvring/kvring/node/internal/clustertest"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// TestALookupCountsTheHeldPrefixAndItsLeasePinsIt: a lookup counts the
// leading ids some owner holds (a gap ends the count); with a pin TTL
// the holders pin them under a lease until ReleaseLease, which the same
// coordinator knows once; a remove (a client's DEL) removes a pinned chunk
// all the same.
func TestALookupCountsTheHeldPrefixAndItsLeasePinsIt(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{})
	ref := c.Register(t, "read/lookup", 2, 1)
	var chunks []clustertest.Chunk
	for n := range uint64(40) {
		chunks = append(chunks, clustertest.ChunkOf(500+n, 600))
	}
	put(t, c, 0, ref, chunks[:30]...)
	put(t, c, 0, ref, chunks[31:]...) // a gap at 30
	cache := c.Cache(t, 1)
	ctx := context.Background()
	lk, err := cache.Lookup(ctx, &kvringv1.LookupRequest{Namespace: ref, Ids: clustertest.IDs(chunks), PinTtlMs: 60_000})
	if err != nil || lk.GetHeld() != 30 || lk.GetLeaseId() == 0 {
		t.Fatalf("lookup: %v %v, want 30 held under a lease", lk, err)
	}
	// A remove is a client's explicit removal: the lease keeps a chunk
	// from eviction, not from it (RemoveRequest.unpin), and a get after it
	// misses.
	rm, err := c.Nodes[2].Coord.Remove(ctx, ref, clustertest.IDs(chunks[:1]))
	if err != nil || !rm.Removed[0] || rm.Pinned[0] {
		t.Fatalf("remove of a pinned chunk: %+v %v, want removed", rm, err)
	}
	if got, err := clustertest.Get(ctx, cache, ref, clustertest.IDs(chunks[:1]), nil); err != nil || got[0].Header.GetStatus() != kvringv1.ReadStatus_READ_STATUS_NOT_FOUND {
		t.Fatalf("get of a pinned chunk after a remove: %+v %v, want NOT_FOUND", got, err)
	}
	rel, err := cache.ReleaseLease(ctx, &kvringv1.ReleaseLeaseRequest{LeaseId: lk.GetLeaseId()})
	if err != nil || !rel.GetReleased() {
		t.Fatalf("release: %v %v", rel, err)
	}
	if rel, _ := cache.ReleaseLease(ctx, &kvringv1.ReleaseLeaseRequest{LeaseId: lk.GetLeaseId()}); rel.GetReleased() {
		t.Fatal("a lease was released twice")
	}
	rm, err = c.Nodes[2].Coord.Remove(ctx, ref, clustertest.IDs(chunks[:2]))
	if err != nil || !slices.Equal(rm.Removed, []bool{false, true}) {
		t.Fatalf("remove after the release: %+v %v", rm, err)
	}
	lk, err = cache.Lookup(ctx, &kvringv1.LookupRequest{Namespace: ref, Ids: clustertest.IDs(chunks)})
	if err != nil || lk.GetHeld() != 0 {
		t.Fatalf("lookup after the remove: %v %v", lk, err)
	}
	c.Nodes[1].Coord.Sweep()
}

// TestDropEverywhereEmptiesEveryMember: a namespace dropped through one
// coordinator loses its chunks and its record on every member; a member
// that cannot be reached is named in the error.
func TestDropEverywhereEmptiesEveryMember(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{})
	ref := c.Register(t, "read/drop", 3, 1)
	put(t, c, 0, ref, clustertest.ChunkOf(1, 100), clustertest.ChunkOf(2, 100))
	n, err := c.Nodes[1].Coord.DropEverywhere(context.Background(), ref)
	if err != nil || n != 6 {
		t.Fatalf("drop: %d chunks, %v; want 6 (two chunks on three members)", n, err)
	}
	for _, nd := range c.Nodes {
		if nd.Registry.Get(ref.GetName()) != nil {
			t.Fatalf("node %s still knows the dropped namespace", nd.ID)
		}
	}
	ref = c.Register(t, "read/drop2", 1, 1)
	c.Net.Cut(c.Nodes[0].ID, c.Nodes[2].ID)
	if _, err := c.Nodes[0].Coord.Remove(context.Background(), ref, [][]byte{clustertest.ChunkOf(1, 1).ID}); !errors.Is(err, transfer.ErrUnavailable) || !contains(err.Error(), c.Nodes[2].ID) {
		t.Fatalf("a remove with a member cut off: %v", err)
	}
}

// TestListKeysPagesTheNamedChunksOfAMember: ListKeys asks a member (this
// node in process, or a peer) for the names of the chunks it holds.
func TestListKeysPagesTheNamedChunksOfAMember(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: 2})
	ref := c.Register(t, "read/keys", 2, 2)
	ch := clustertest.ChunkOf(9, 100)
	r := ch.Ref()
	r.Name = []byte("key-1")
	stream, err := c.Cache(t, 0).Put(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{Namespace: ref, Chunks: []*kvringv1.ChunkRef{r}, Eager: true}}})
	_ = stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: &kvringv1.DataFrame{Data: ch.Data}}})
	_ = stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}})
	if m, err := stream.Recv(); err != nil || m.GetResult().GetResults()[0].GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED {
		t.Fatalf("put of a named chunk: %v %v", m, err)
	}
	for _, m := range []ring.Member{c.Nodes[0].Member(), c.Nodes[1].Member()} {
		names, _, err := c.Nodes[0].Coord.ListKeys(context.Background(), m, "", nil, 10)
		if err != nil || len(names) != 1 || !contains(string(names[0]), "key-1") {
			t.Fatalf("keys of %s: %q %v", m.ID, names, err)
		}
	}
}

// TestNamespacesAreOneClusterWide: a registration through one node is
// known to every node; a different schema under the name is refused; a
// member that missed it learns it when a client checks it there, or when
// it syncs on joining.
func TestNamespacesAreOneClusterWide(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{})
	ref := c.Register(t, "ns/wide", 1, 1)
	for _, n := range c.Nodes {
		if n.Registry.Get(ref.GetName()) == nil {
			t.Fatalf("node %s does not know the namespace", n.ID)
		}
	}
	ctx := context.Background()
	_, err := c.Cache(t, 2).RegisterNamespace(ctx, &kvringv1.RegisterNamespaceRequest{Name: "ns/wide",
		Schema: &kvringv1.NamespaceSchema{Model: "other", Dtype: "bf16", TokensPerChunk: 16}})
	if !errors.Is(transfer.FromStatus(err), transfer.ErrSchemaMismatch) {
		t.Fatalf("a different schema: %v", err)
	}
	// Node 2 forgets everything (it was out of the ring), then learns.
	rec := c.Nodes[0].Registry.Get("ns/wide")
	c.Nodes[2].Registry.Delete(rec.GetName())
	check := metadata.AppendToOutgoingContext(ctx, transfer.RegisterExistingKey, "true")
	resp, err := c.Cache(t, 2).RegisterNamespace(check, &kvringv1.RegisterNamespaceRequest{Name: "ns/wide",
		Schema: &kvringv1.NamespaceSchema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}})
	if err != nil || resp.GetCreated() || c.Nodes[2].Registry.Get("ns/wide") == nil {
		t.Fatalf("a check on a node that missed the registration: %v %v", resp, err)
	}
	c.Nodes[2].Registry.Delete(rec.GetName())
	c.Nodes[2].Coord.SyncNamespaces(ctx)
	if c.Nodes[2].Registry.Get("ns/wide") == nil {
		t.Fatal("a sync did not learn the namespace")
	}
	if _, err := c.Cache(t, 2).RegisterNamespace(check, &kvringv1.RegisterNamespaceRequest{Name: "never/registered",
		Schema: &kvringv1.NamespaceSchema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}}); !errors.Is(transfer.FromStatus(err), transfer.ErrUnknownNamespace) {
		t.Fatalf("a check of an unknown name: %v", err)
	}
}

// TestTopologyIsTheCoordinatorsRingView: epoch, members and settings of
// the ring the node reads, itself named.
func TestTopologyIsTheCoordinatorsRingView(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{})
	top, err := c.Cache(t, 1).Topology(context.Background(), &kvringv1.TopologyRequest{})
	if err != nil || top.GetEpoch() != 1 || len(top.GetMembers()) != 3 || top.GetSelf().GetNodeId() != c.Nodes[1].ID ||
		top.GetSelf().GetGrpcAddr() != c.Nodes[1].Addr || top.GetRing().GetReplicationFactor() != 3 {
		t.Fatalf("topology: %v %v", top, err)
	}
}

// TestWritesGoPastADrainingOwner: a chunk whose owner drains is written to
// the next member in its ring order that does not, and read back through
// any node.
func TestWritesGoPastADrainingOwner(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{})
	ref := c.Register(t, "write/drain", 1, 1)
	ch := chunkOwnedBy(t, c, ref.GetName(), 1, 1, 700, ids(c.Nodes[1]))
	c.SetDraining(c.Nodes[1].ID, true)
	res := put(t, c, 0, ref, ch)
	if res[0].GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED || slices.Contains(holders(res[0]), c.Nodes[1].ID) {
		t.Fatalf("a put past a draining owner: %+v", res[0])
	}
	got, err := clustertest.Get(context.Background(), c.Cache(t, 2), ref, [][]byte{ch.ID}, nil)
	if err != nil || string(got[0].Data) != string(ch.Data) {
		t.Fatalf("get: %v %+v", err, got)
	}
	owners := c.Nodes[0].Coord.Owners(c.Ring(), ref.GetName(), ch.ID, 1)
	if len(owners) != 1 || owners[0].ID == c.Nodes[1].ID {
		t.Fatalf("owners while node 1 drains: %v", owners)
	}
}
