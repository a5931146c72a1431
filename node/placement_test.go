package node

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

const groupedNS = "test/grouped"

// groupedClient is a client of groupedNS, whose chunks are placed k at a time,
// connected to addr with routing off (every call coordinated by addr's node).
func groupedClient(t *testing.T, addr string, k uint32) *client.Client {
	t.Helper()
	return testClientWith(t, client.Config{
		Conn:           client.ConnConfig{Seeds: []string{addr}},
		Namespace:      groupedNS,
		Schema:         client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16, ChunksPerGroup: k},
		DisableRouting: true,
		Logger:         quietLogger(),
	})
}

// promptChunks returns n chunks of one prompt with their group keys for
// groups of k.
func promptChunks(seed uint64, n, k int) []client.Chunk {
	chunks := make([]client.Chunk, n)
	ids := make([]client.ChunkID, n)
	for i := range chunks {
		chunks[i] = chunkOf(seed<<20|uint64(i), 256)
		ids[i] = chunks[i].ID
	}
	for i, g := range client.GroupKeys(ids, k) {
		chunks[i].Group = g
	}
	return chunks
}

func chunkIDs(chunks []client.Chunk) []client.ChunkID {
	ids := make([]client.ChunkID, len(chunks))
	for i := range chunks {
		ids[i] = chunks[i].ID
	}
	return ids
}

// histogram returns the sample count and sum of a histogram family the
// node exports, over all its series.
func histogram(t *testing.T, nd *testNode, family string) (count uint64, sum float64) {
	t.Helper()
	return histogramOf(t, nd, family, "", "")
}

// histogramOf is histogram over the series whose label has value (every
// series when label is "").
func histogramOf(t *testing.T, nd *testNode, family, label, value string) (count uint64, sum float64) {
	t.Helper()
	mfs, err := nd.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				match = match || (l.GetName() == label && l.GetValue() == value)
			}
			if match {
				count += m.GetHistogram().GetSampleCount()
				sum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return count, sum
}

// distinctPrimaries counts the distinct primary owners of keys on the test ring.
func (tc *testCluster) distinctPrimaries(t *testing.T, ns string, keys []client.ChunkID) int {
	t.Helper()
	seen := map[string]bool{}
	for _, k := range keys {
		p, err := tc.Ring().Primary(ns, k[:])
		if err != nil {
			t.Fatal(err)
		}
		seen[p.ID] = true
	}
	return len(seen)
}

// TestGroupedNamespaceKeepsEachGroupOnOneNode: with chunks_per_group K, the
// K chunks of a group are held together on their group key's owner, and a
// lookup of the whole prompt asks only the owners of its groups, where
// placing every chunk by its own id asks nearly every node.
func TestGroupedNamespaceKeepsEachGroupOnOneNode(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 12, 16<<20)
	const n, k = 64, 16
	c := groupedClient(t, tc.nodes[0].addr, k)
	chunks := promptChunks(1, n, k)
	res, err := c.Put(context.Background(), chunks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != client.Stored || len(r.Holders) != 1 {
			t.Fatalf("chunk %d: %+v", i, r)
		}
		if r.Holders[0].ID != res[i-i%k].Holders[0].ID {
			t.Fatalf("chunk %d is held on %s, the first chunk of its group on %s", i, r.Holders[0].ID, res[i-i%k].Holders[0].ID)
		}
	}
	fp, err := c.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range tc.nodes {
		for i, ch := range chunks {
			on := nd.id == res[i].Holders[0].ID
			if nd.st.Contains(namespace.StoreName(groupedNS, fp), store.ID(ch.ID)) != on {
				t.Fatalf("chunk %d on node %s: held %v, want %v", i, nd.id, !on, on)
			}
		}
	}

	ids := chunkIDs(chunks)
	lr, err := c.Lookup(context.Background(), ids, 0)
	if err != nil || lr.Held != n {
		t.Fatalf("lookup: %+v %v, want all %d held", lr, err, n)
	}
	want := tc.distinctPrimaries(t, groupedNS, client.GroupKeys(ids, k))
	if count, sum := histogram(t, tc.nodes[0], "kvring_lookup_fanout"); count != 1 || int(sum) != want {
		t.Fatalf("kvring_lookup_fanout: %d lookups asking %v nodes, want 1 asking the %d owners of the 4 groups", count, sum, want)
	}
	if perChunk := tc.distinctPrimaries(t, groupedNS, ids); perChunk <= want {
		t.Fatalf("placing by chunk id would ask %d nodes, grouped %d: the test shows nothing", perChunk, want)
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
}

// TestGroupedLookupStopsAfterTheFirstMissingWave: a lookup asks the groups
// in waves of 1, 2, 4... groups and asks no group after the wave that missed.
func TestGroupedLookupStopsAfterTheFirstMissingWave(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 12, 16<<20)
	const k = 32 // one group per first wave (minFirstWave ids)
	c := groupedClient(t, tc.nodes[0].addr, k)
	chunks := promptChunks(2, 8*k, k) // 8 groups: waves {0}, {1, 2}, {3..6}, {7}
	if _, err := c.Put(context.Background(), chunks[:k+3]); err != nil {
		t.Fatal(err)
	}
	ids := chunkIDs(chunks)
	lr, err := c.Lookup(context.Background(), ids, time.Minute)
	if err != nil || lr.Held != k+3 || lr.Lease == 0 {
		t.Fatalf("lookup: %+v %v, want %d held and a lease", lr, err, k+3)
	}
	keys := client.GroupKeys(ids, k)
	asked := tc.distinctPrimaries(t, groupedNS, []client.ChunkID{keys[0], keys[k], keys[2*k]})
	if _, sum := histogram(t, tc.nodes[0], "kvring_lookup_fanout"); int(sum) != asked {
		t.Fatalf("the lookup asked %v nodes, want the %d owners of groups 0-2 only", sum, asked)
	}
	pinned := int64(0)
	for _, nd := range tc.nodes {
		pinned += nd.st.Stats().PinnedChunks
	}
	if pinned != k+3 {
		t.Fatalf("%d chunks pinned, want the %d counted", pinned, k+3)
	}
}

// TestGroupKeysMustMatchTheNamespace: a grouped namespace refuses requests
// without group keys and a per-chunk one refuses requests with them, both
// as InvalidArgument naming the cause; runs must cover the ids exactly.
func TestGroupKeysMustMatchTheNamespace(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 1, 8<<20)
	grouped := groupedClient(t, tc.nodes[0].addr, 4)
	gfp, err := grouped.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	plain := testClient(t, tc.nodes[0].addr, 1, 1)
	pfp, err := plain.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(tc.nodes[0].addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cache := kvringv1.NewCacheClient(cc)
	id := func(i int) []byte { var b [32]byte; binary.LittleEndian.PutUint32(b[:], uint32(i)); return b[:] }
	gref := &kvringv1.NamespaceRef{Name: groupedNS, Fingerprint: gfp}
	pref := &kvringv1.NamespaceRef{Name: "test/model", Fingerprint: pfp}
	for _, tt := range []struct {
		name string
		req  *kvringv1.LookupRequest
	}{
		{"grouped without groups", &kvringv1.LookupRequest{Namespace: gref, Ids: [][]byte{id(1), id(2)}}},
		{"per-chunk with groups", &kvringv1.LookupRequest{Namespace: pref, Ids: [][]byte{id(1)},
			Groups: []*kvringv1.GroupRun{{Key: id(1), Count: 1}}}},
		{"runs too short", &kvringv1.LookupRequest{Namespace: gref, Ids: [][]byte{id(1), id(2)},
			Groups: []*kvringv1.GroupRun{{Key: id(1), Count: 1}}}},
		{"runs too long", &kvringv1.LookupRequest{Namespace: gref, Ids: [][]byte{id(1)},
			Groups: []*kvringv1.GroupRun{{Key: id(1), Count: 2}}}},
		{"short key", &kvringv1.LookupRequest{Namespace: gref, Ids: [][]byte{id(1)},
			Groups: []*kvringv1.GroupRun{{Key: []byte{1}, Count: 1}}}},
	} {
		_, err := cache.Lookup(context.Background(), tt.req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", tt.name, err)
		}
	}
	_, err = grouped.Put(context.Background(), []client.Chunk{chunkOf(1, 100)})
	if !errors.Is(err, transfer.ErrInvalidArgument) {
		t.Errorf("put of a chunk without its group in a grouped namespace: %v, want InvalidArgument", err)
	}
}
