package node

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// stuckPeer accepts every Peer call and never answers: a process that hangs
// with its connections open.
type stuckPeer struct {
	kvringv1.UnimplementedPeerServer
}

func (stuckPeer) Prepare(s grpc.BidiStreamingServer[kvringv1.PrepareRequest, kvringv1.PrepareResponse]) error {
	<-s.Context().Done()
	return s.Context().Err()
}
func (stuckPeer) Has(ctx context.Context, _ *kvringv1.HasRequest) (*kvringv1.HasResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (stuckPeer) Fetch(_ *kvringv1.FetchRequest, s grpc.ServerStreamingServer[kvringv1.FetchResponse]) error {
	<-s.Context().Done()
	return s.Context().Err()
}

// addStuckMember puts a hanging node into every node's ring.
func (tc *testCluster) addStuckMember(t *testing.T) ring.Member {
	return tc.addFakeMember(t, "stuck", stuckPeer{})
}

// addFakeMember serves peer as node id and puts it into every node's ring.
func (tc *testCluster) addFakeMember(t *testing.T, id string, peer kvringv1.PeerServer) ring.Member {
	t.Helper()
	m := ring.Member{ID: id, Addr: serveFake(t, func(gs *grpc.Server) { kvringv1.RegisterPeerServer(gs, peer) })}
	tc.useMembers(t, append(tc.Ring().Members(), m))
	return m
}

// TestAStuckOwnerIsSkippedWithinTheDeadline: an owner that hangs (not just
// refuses connections) costs the engine at most the peer timeout: R=2 writes
// are stored on the other owner and, in the stuck one's place, on the next
// member in ring order; lookups count them, reads find them, all within the
// engine's deadline.
func TestAStuckOwnerIsSkippedWithinTheDeadline(t *testing.T) {
	t.Parallel()
	tc := newTestClusterWith(t, 2, 64<<20, func(_ int, cfg *Config) { cfg.PeerTimeout = time.Second })
	c := testClient(t, tc.nodes[0].addr, 2, 1)
	ctx := context.Background()
	if _, err := c.Register(ctx); err != nil {
		t.Fatal(err)
	}
	stuck := tc.addStuckMember(t)
	var chunks []client.Chunk
	var ids []client.ChunkID
	for i := uint64(0); i < 12; i++ {
		chunks = append(chunks, chunkOf(500+i, 20_000))
		ids = append(ids, chunks[i].ID)
	}
	cctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	start := time.Now()
	res, err := c.Put(cctx, chunks)
	if err != nil {
		t.Fatalf("put with a stuck owner: %v (after %v)", err, time.Since(start))
	}
	touched := 0
	for i, r := range res {
		if r.Status != client.Stored || r.Degraded || len(r.Holders) != 2 {
			t.Fatalf("chunk %d: %+v, want stored on the two live nodes", i, r)
		}
		for _, h := range r.Holders {
			if h.ID == stuck.ID {
				t.Fatalf("chunk %d reported held by the stuck node", i)
			}
		}
		if slices.ContainsFunc(tc.Ring().Owners("test/model", ids[i][:], 2), func(m ring.Member) bool { return m.ID == stuck.ID }) {
			touched++
		}
	}
	if touched == 0 {
		t.Fatal("no chunk had the stuck node as an owner; the test proves nothing")
	}
	lr, err := c.Lookup(cctx, ids, 0)
	if err != nil || lr.Held != len(ids) {
		t.Fatalf("lookup with a stuck owner: %v %+v", err, lr)
	}
	got, err := c.Get(cctx, ids)
	if err != nil {
		t.Fatalf("get with a stuck owner: %v", err)
	}
	for i, g := range got {
		if !g.Found || !bytes.Equal(g.Data, chunks[i].Data) {
			t.Fatalf("chunk %d: %q", i, g.Reason)
		}
	}
}

// TestCommitRefusesATokenOfAnotherChunk: a stage token seals only the chunk
// it was issued for.
func TestCommitRefusesATokenOfAnotherChunk(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 1, 8<<20)
	o := tc.nodes[0].svc.Owner
	ref := &kvringv1.NamespaceRef{Name: "ns", Fingerprint: make([]byte, 32)}
	if _, _, err := tc.nodes[0].svc.Registry.Merge(&kvringv1.NamespaceRecord{Name: "ns", Fingerprint: ref.GetFingerprint()}); err != nil {
		t.Fatal(err)
	}
	a, b := chunkOf(1, 100), chunkOf(2, 100)
	p, need, _, err := o.NewPrepare(ref, []*kvringv1.ChunkRef{{Id: a.ID[:], Size: 100, Crc32C: store.Checksum(a.Data)}}, nil)
	if err != nil || len(need) != 1 {
		t.Fatal(err, need)
	}
	if err := p.Frame(transfer.Frame{Index: 0, Data: [][]byte{a.Data}}); err != nil {
		t.Fatal(err)
	}
	votes := o.EndPrepare(p)
	tok := votes[0].GetStageToken()
	res := o.Commit("", ref, []*kvringv1.StagedChunk{{StageToken: tok, Id: b.ID[:]}})
	if res[0].GetStatus() != kvringv1.CommitStatus_COMMIT_STATUS_FAILED {
		t.Fatalf("commit of token %d for another chunk: %v", tok, res[0])
	}
	id := store.ID(b.ID)
	if tc.nodes[0].st.Contains(namespace.StoreName("ns", ref.GetFingerprint()), id) {
		t.Fatal("the other chunk is held")
	}
	// The right chunk still commits with its token.
	res = o.Commit("", ref, []*kvringv1.StagedChunk{{StageToken: tok, Id: a.ID[:]}})
	if res[0].GetStatus() != kvringv1.CommitStatus_COMMIT_STATUS_SEALED {
		t.Fatalf("commit of the right chunk: %v", res[0])
	}
}

// TestLookupLeasePinsOnlyTheCountedPrefixAndIsCapped: a lease pins the
// leading held run and nothing after the first miss, none at all when the
// run is empty, and its TTL is capped by the node's maximum.
func TestLookupLeasePinsOnlyTheCountedPrefixAndIsCapped(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 1, 8<<20)
	c := testClient(t, tc.nodes[0].addr, 1, 1)
	ctx := context.Background()
	a, b, x := chunkOf(1, 1000), chunkOf(2, 1000), chunkOf(3, 1000)
	if _, err := c.Put(ctx, []client.Chunk{a, b}); err != nil {
		t.Fatal(err)
	}
	st := tc.nodes[0].st
	lr, err := c.Lookup(ctx, []client.ChunkID{x.ID, a.ID}, time.Minute)
	if err != nil || lr.Held != 0 || lr.Lease != 0 || st.Stats().PinnedChunks != 0 {
		t.Fatalf("lookup [miss, held]: %v %+v, %d pinned; want 0 held, no lease, nothing pinned", err, lr, st.Stats().PinnedChunks)
	}
	lr, err = c.Lookup(ctx, []client.ChunkID{a.ID, x.ID, b.ID}, 10*time.Hour)
	if err != nil || lr.Held != 1 || lr.Lease == 0 {
		t.Fatalf("lookup [held, miss, held]: %v %+v", err, lr)
	}
	if n := st.Stats().PinnedChunks; n != 1 {
		t.Fatalf("%d chunks pinned, want only the counted one", n)
	}
	if lr.LeaseTTL != time.Minute {
		t.Fatalf("lease TTL %v, want it capped at the node's maximum (1m in this test)", lr.LeaseTTL)
	}
	if err := c.ReleaseLease(ctx, lr.Lease); err != nil {
		t.Fatal(err)
	}
	if n := st.Stats().PinnedChunks; n != 0 {
		t.Fatalf("%d chunks still pinned after release", n)
	}
}

// TestDuplicateIDsInABatchAreBadInput: one batch names each chunk once.
func TestDuplicateIDsInABatchAreBadInput(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 1, 8<<20)
	c := testClient(t, tc.nodes[0].addr, 1, 1)
	a := chunkOf(1, 1000)
	_, err := c.Put(context.Background(), []client.Chunk{a, a})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("duplicate ids: %v, want InvalidArgument", err)
	}
}

// damagingPeer holds every chunk it is asked for, declares its true checksum,
// and sends its bytes with one bit flipped, in frames of 100,000 bytes: an
// owner whose memory or wire corrupted a chunk.
type damagingPeer struct {
	kvringv1.UnimplementedPeerServer
	chunks map[store.ID][]byte
}

func (p damagingPeer) Fetch(req *kvringv1.FetchRequest, s grpc.ServerStreamingServer[kvringv1.FetchResponse]) error {
	for i, raw := range req.GetIds() {
		data := p.chunks[store.ID(raw)]
		err := s.Send(&kvringv1.FetchResponse{Epoch: 2, Msg: &kvringv1.FetchResponse_Header{Header: &kvringv1.ChunkHeader{
			Index: uint32(i), Status: kvringv1.ReadStatus_READ_STATUS_FOUND,
			Chunk: &kvringv1.ChunkRef{Id: raw, Size: uint64(len(data)), Crc32C: store.Checksum(data)}}}})
		if err != nil {
			return err
		}
		bad := bytes.Clone(data)
		bad[len(bad)-1] ^= 1
		err = transfer.SplitFrames(uint32(i), bad, 100_000, func(f *kvringv1.DataFrame) error {
			return s.Send(&kvringv1.FetchResponse{Epoch: 2, Msg: &kvringv1.FetchResponse_Data{Data: f}})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// TestBytesThatFailTheirChecksumAreNeverServed: a coordinator checks the
// bytes it fetches from an owner (as it copies them out of the received
// frames) against the owner's declared checksum; a chunk that fails is a
// miss naming the checksum, counted as checksum_error, and none of its bytes
// reach the engine.
func TestBytesThatFailTheirChecksumAreNeverServed(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 1, 64<<20)
	chunks := map[store.ID][]byte{}
	bad := tc.addFakeMember(t, "damaging", damagingPeer{chunks: chunks})
	// A chunk the fake node is the primary owner of.
	var ch client.Chunk
	for n := uint64(0); ; n++ {
		ch = chunkOf(900+n, 300_000)
		if m, _ := tc.Ring().Primary("test/model", ch.ID[:]); m.ID == bad.ID {
			break
		}
	}
	chunks[store.ID(ch.ID)] = ch.Data
	c := testClientWith(t, client.Config{Conn: client.ConnConfig{Seeds: []string{tc.nodes[0].addr}}, Namespace: "test/model",
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, DisableRouting: true, Logger: quietLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Register(ctx); err != nil { // a read does not register the namespace
		t.Fatal(err)
	}
	res, err := c.Get(ctx, []client.ChunkID{ch.ID})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; r.Found || r.Data != nil || !strings.Contains(r.Reason, "failed their checksum") {
		t.Fatalf("a damaged chunk: found %v, %d bytes, reason %q; want a miss naming the checksum", r.Found, len(r.Data), r.Reason)
	}
	if got := testutil.ToFloat64(tc.nodes[0].svc.Metrics.GetBy[metrics.GetChecksumError]); got != 1 {
		t.Fatalf("checksum_error counted %v times, want 1", got)
	}
}

// TestAnyGRPCClientCanPutAndGet: nodes read frames with transfer.Codec, but
// on the wire it is plain protobuf: a client with gRPC's default codec (any
// language's generated code) puts chunks in frames of several sizes and
// reads them back byte for byte.
func TestAnyGRPCClientCanPutAndGet(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 1, 64<<20)
	cc, err := grpc.NewClient(tc.nodes[0].addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(4<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cache := kvringv1.NewCacheClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg, err := cache.RegisterNamespace(ctx, &kvringv1.RegisterNamespaceRequest{Name: "plain/grpc",
		Schema: &kvringv1.NamespaceSchema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}})
	if err != nil {
		t.Fatal(err)
	}
	ref := &kvringv1.NamespaceRef{Name: "plain/grpc", Fingerprint: reg.GetNamespace().GetFingerprint()}
	chunks := []client.Chunk{chunkOf(1, 3<<20+5), chunkOf(2, 1), chunkOf(3, 70_000)}
	refs := make([]*kvringv1.ChunkRef, len(chunks))
	for i, c := range chunks {
		refs[i] = &kvringv1.ChunkRef{Id: c.ID[:], Size: uint64(len(c.Data)), Crc32C: store.Checksum(c.Data)}
	}
	put, err := cache.Put(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := put.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{Namespace: ref, Chunks: refs}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := put.Recv(); err != nil || len(m.GetNeed().GetNeed()) != len(chunks) {
		t.Fatalf("need: %v %v", m, err)
	}
	for i, c := range chunks {
		err := transfer.SplitFrames(uint32(i), c.Data, 300_000+i, func(f *kvringv1.DataFrame) error {
			return put.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: f}})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := put.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}}); err != nil {
		t.Fatal(err)
	}
	m, err := put.Recv()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range m.GetResult().GetResults() {
		if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED {
			t.Fatalf("chunk %d: %v", i, r)
		}
	}
	ids := make([][]byte, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID[:]
	}
	get, err := cache.Get(ctx, &kvringv1.GetRequest{Namespace: ref, Ids: ids})
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]byte, len(chunks))
	cur := -1
	for {
		m, err := get.Recv()
		if err != nil {
			break
		}
		if h := m.GetHeader(); h != nil {
			cur = int(h.GetIndex())
			continue
		}
		got[cur] = append(got[cur], m.GetData().GetData()...)
	}
	for i, c := range chunks {
		if !bytes.Equal(got[i], c.Data) {
			t.Fatalf("chunk %d: read %d bytes, want the %d put", i, len(got[i]), len(c.Data))
		}
	}
}
