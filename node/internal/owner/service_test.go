package owner_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/internal/clustertest"
	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// peerOf is a single core node and its Peer service as a coordinator
// calls it, with namespace "svc" registered (R=1).
func peerOf(t *testing.T) (*clustertest.Core, kvringv1.PeerClient, *kvringv1.NamespaceRef) {
	t.Helper()
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: 1})
	return c, c.Peer(t, 0), c.Register(t, "svc", 1, 1)
}

var caller = &kvringv1.PeerCaller{NodeId: "coordinator", Epoch: 1}

// prepare runs a Prepare stream for chunks up to its votes, and returns
// the stream (not half-closed yet) and the votes.
func prepare(t *testing.T, ctx context.Context, peer kvringv1.PeerClient, ref *kvringv1.NamespaceRef, chunks ...clustertest.Chunk) (kvringv1.Peer_PrepareClient, []*kvringv1.ChunkVote, *kvringv1.PrepareNeed) {
	t.Helper()
	stream, err := peer.Prepare(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refs := make([]*kvringv1.ChunkRef, len(chunks))
	for i, ch := range chunks {
		refs[i] = ch.Ref()
	}
	if err := stream.Send(&kvringv1.PrepareRequest{Msg: &kvringv1.PrepareRequest_Begin{Begin: &kvringv1.PrepareBegin{
		Caller: caller, Namespace: ref, Chunks: refs}}}); err != nil {
		t.Fatal(err)
	}
	m, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	need := m.GetNeed()
	for _, i := range need.GetNeed() {
		err := transfer.SplitFrames(i, chunks[i].Data, transfer.MaxFrameBytes, func(f *kvringv1.DataFrame) error {
			return stream.Send(&kvringv1.PrepareRequest{Msg: &kvringv1.PrepareRequest_Data{Data: f}})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Send(&kvringv1.PrepareRequest{Msg: &kvringv1.PrepareRequest_End{End: &kvringv1.PrepareEnd{}}}); err != nil {
		t.Fatal(err)
	}
	m, err = stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return stream, m.GetVotes().GetVotes(), need
}

// TestAChunkPreparedAndCommittedOverThePeerServiceIsServed: the Peer
// service's whole write and read path: prepare (need, frames, ready
// votes), half-close, commit (sealed), Has (held), Fetch (the bytes), a
// second prepare (already held, no bytes needed), Remove, Has (gone).
func TestAChunkPreparedAndCommittedOverThePeerServiceIsServed(t *testing.T) {
	t.Parallel()
	_, peer, ref := peerOf(t)
	ctx := context.Background()
	chunks := []clustertest.Chunk{clustertest.ChunkOf(1, 3<<20), clustertest.ChunkOf(2, 1000)}
	stream, votes, need := prepare(t, ctx, peer, ref, chunks...)
	if len(need.GetNeed()) != 2 || len(votes) != 2 {
		t.Fatalf("need %v, votes %v", need.GetNeed(), votes)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("the prepare stream after the half-close: %v", err)
	}
	staged := make([]*kvringv1.StagedChunk, len(votes))
	for k, v := range votes {
		if v.GetVote() != kvringv1.Vote_VOTE_READY {
			t.Fatalf("vote %+v", v)
		}
		staged[k] = &kvringv1.StagedChunk{StageToken: v.GetStageToken(), Id: chunks[v.GetIndex()].ID}
	}
	cres, err := peer.Commit(ctx, &kvringv1.CommitRequest{Caller: caller, Namespace: ref, Chunks: staged})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cres.GetResults() {
		if r.GetStatus() != kvringv1.CommitStatus_COMMIT_STATUS_SEALED {
			t.Fatalf("commit: %+v", r)
		}
	}
	has, err := peer.Has(ctx, &kvringv1.HasRequest{Caller: caller, Namespace: ref, Ids: clustertest.IDs(chunks), ReportStaging: true})
	if err != nil || !slices.Equal(has.GetHeld(), []bool{true, true}) || slices.Contains(has.GetStaging(), true) {
		t.Fatalf("has: %v %v", has, err)
	}
	fetched := fetch(t, peer, ref, clustertest.IDs(chunks))
	for i, ch := range chunks {
		if string(fetched[i]) != string(ch.Data) {
			t.Fatalf("fetch of chunk %d: %d bytes, want %d", i, len(fetched[i]), len(ch.Data))
		}
	}
	stream2, votes2, need2 := prepare(t, ctx, peer, ref, chunks...)
	_ = stream2.CloseSend()
	if len(need2.GetNeed()) != 0 || len(need2.GetVotes()) != 2 || need2.GetVotes()[0].GetVote() != kvringv1.Vote_VOTE_ALREADY_HELD || len(votes2) != 0 {
		t.Fatalf("a second prepare: need %v, votes %v then %v", need2.GetNeed(), need2.GetVotes(), votes2)
	}
	rm, err := peer.Remove(ctx, &kvringv1.RemoveRequest{Caller: caller, Namespace: ref, Ids: clustertest.IDs(chunks[:1])})
	if err != nil || !slices.Equal(rm.GetRemoved(), []bool{true}) {
		t.Fatalf("remove: %v %v", rm, err)
	}
	has, err = peer.Has(ctx, &kvringv1.HasRequest{Caller: caller, Namespace: ref, Ids: clustertest.IDs(chunks)})
	if err != nil || !slices.Equal(has.GetHeld(), []bool{false, true}) {
		t.Fatalf("has after remove: %v %v", has, err)
	}
	fetched = fetch(t, peer, ref, clustertest.IDs(chunks[:1]))
	if fetched[0] != nil {
		t.Fatal("fetch of a removed chunk sent bytes")
	}
}

// fetch reads ids with Fetch: per id its bytes, nil when not found.
func fetch(t *testing.T, peer kvringv1.PeerClient, ref *kvringv1.NamespaceRef, ids [][]byte) [][]byte {
	t.Helper()
	s, err := peer.Fetch(context.Background(), &kvringv1.FetchRequest{Caller: caller, Namespace: ref, Ids: ids})
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(ids))
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h := m.GetHeader(); h != nil {
			if h.GetStatus() == kvringv1.ReadStatus_READ_STATUS_FOUND {
				out[h.GetIndex()] = []byte{}
			}
			continue
		}
		out[m.GetData().GetIndex()] = append(out[m.GetData().GetIndex()], m.GetData().GetData()...)
	}
}

// TestVotesNobodyTookAreAborted: a coordinator that goes away after the
// votes were sent and before it half-closed the stream (it may never have
// read them) leaves nothing staged: the owner aborts those tokens, and
// their commit finds them unknown.
func TestVotesNobodyTookAreAborted(t *testing.T) {
	t.Parallel()
	c, peer, ref := peerOf(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch := clustertest.ChunkOf(3, 5000)
	_, votes, _ := prepare(t, ctx, peer, ref, ch)
	if len(votes) != 1 || votes[0].GetVote() != kvringv1.Vote_VOTE_READY {
		t.Fatalf("votes %v", votes)
	}
	cancel()
	o := c.Nodes[0].Owner
	testutil.Eventually(t, "the owner to abort the votes nobody took", 30*time.Second, func() bool {
		return !o.Staging(ref, clustertest.IDs([]clustertest.Chunk{ch}), []bool{false})[0]
	})
	cres, err := peer.Commit(context.Background(), &kvringv1.CommitRequest{Caller: caller, Namespace: ref,
		Chunks: []*kvringv1.StagedChunk{{StageToken: votes[0].GetStageToken(), Id: ch.ID}}})
	if err != nil || cres.GetResults()[0].GetStatus() == kvringv1.CommitStatus_COMMIT_STATUS_SEALED {
		t.Fatalf("commit of an aborted token: %v %v", cres, err)
	}
}

// TestAMessageAfterTheEndOfAPrepareIsBadInput: a coordinator that sends
// anything after the end instead of half-closing has its votes aborted and
// the stream ended with InvalidArgument.
func TestAMessageAfterTheEndOfAPrepareIsBadInput(t *testing.T) {
	t.Parallel()
	c, peer, ref := peerOf(t)
	ch := clustertest.ChunkOf(4, 5000)
	stream, _, _ := prepare(t, context.Background(), peer, ref, ch)
	_ = stream.Send(&kvringv1.PrepareRequest{Msg: &kvringv1.PrepareRequest_End{End: &kvringv1.PrepareEnd{}}})
	if _, err := stream.Recv(); !errors.Is(transfer.FromStatus(err), transfer.ErrInvalidArgument) {
		t.Fatalf("a message after the end: %v", err)
	}
	if c.Nodes[0].Owner.Staging(ref, [][]byte{ch.ID}, []bool{false})[0] {
		t.Fatal("the chunk stayed staged")
	}
}

// TestAbortFreesAStagedChunk: Abort with a coordinator's tokens frees
// what it staged; a later prepare of the chunk needs its bytes again.
func TestAbortFreesAStagedChunk(t *testing.T) {
	t.Parallel()
	c, peer, ref := peerOf(t)
	ch := clustertest.ChunkOf(5, 5000)
	stream, votes, _ := prepare(t, context.Background(), peer, ref, ch)
	_ = stream.CloseSend()
	if _, err := peer.Abort(context.Background(), &kvringv1.AbortRequest{Caller: caller, StageTokens: []uint64{votes[0].GetStageToken()}}); err != nil {
		t.Fatal(err)
	}
	o := c.Nodes[0].Owner
	if o.Staging(ref, [][]byte{ch.ID}, []bool{false})[0] {
		t.Fatal("the chunk stayed staged after its abort")
	}
	stream, _, need := prepare(t, context.Background(), peer, ref, ch)
	_ = stream.CloseSend()
	if len(need.GetNeed()) != 1 {
		t.Fatalf("a prepare after the abort: need %v", need.GetNeed())
	}
}

// TestNamespacesAreMergedAndListed: PutNamespace takes a peer's record of
// a new name and answers what it holds; ListNamespaces lists all or the
// names asked; a record without a fingerprint is bad input.
func TestNamespacesAreMergedAndListed(t *testing.T) {
	t.Parallel()
	_, peer, ref := peerOf(t)
	ctx := context.Background()
	rec := &kvringv1.NamespaceRecord{Name: "other", ReplicationFactor: 1, MinReplicas: 1, CreatedUnixMs: time.Now().UnixMilli(),
		Schema: &kvringv1.NamespaceSchema{Model: "x", Dtype: "bf16", TokensPerChunk: 16}}
	rec.Fingerprint = namespace.Fingerprint(rec.GetSchema())
	resp, err := peer.PutNamespace(ctx, &kvringv1.PutNamespaceRequest{Caller: caller, Namespace: rec})
	if err != nil || !resp.GetAccepted() {
		t.Fatalf("put namespace: %v %v", resp, err)
	}
	all, err := peer.ListNamespaces(ctx, &kvringv1.ListNamespacesRequest{Caller: caller})
	if err != nil || len(all.GetNamespaces()) != 2 {
		t.Fatalf("list: %v %v", all, err)
	}
	one, err := peer.ListNamespaces(ctx, &kvringv1.ListNamespacesRequest{Caller: caller, Names: []string{ref.GetName()}})
	if err != nil || len(one.GetNamespaces()) != 1 || one.GetNamespaces()[0].GetName() != ref.GetName() {
		t.Fatalf("list one: %v %v", one, err)
	}
	if _, err := peer.PutNamespace(ctx, &kvringv1.PutNamespaceRequest{Caller: caller, Namespace: &kvringv1.NamespaceRecord{Name: "bad"}}); !errors.Is(transfer.FromStatus(err), transfer.ErrInvalidArgument) {
		t.Fatalf("a record without a fingerprint: %v", err)
	}
}

// TestPinsHoldUntilUnpinnedAndDropRemovesTheNamespace: Has with a pin
// pins what it reports held (Remove then reports it pinned, not removed)
// until Unpin; a drop removes the namespace's chunks and its record.
func TestPinsHoldUntilUnpinnedAndDropRemovesTheNamespace(t *testing.T) {
	t.Parallel()
	c, peer, ref := peerOf(t)
	ctx := context.Background()
	ch := clustertest.ChunkOf(6, 4000)
	stream, votes, _ := prepare(t, ctx, peer, ref, ch)
	_ = stream.CloseSend()
	if _, err := peer.Commit(ctx, &kvringv1.CommitRequest{Caller: caller, Namespace: ref,
		Chunks: []*kvringv1.StagedChunk{{StageToken: votes[0].GetStageToken(), Id: ch.ID}}}); err != nil {
		t.Fatal(err)
	}
	has, err := peer.Has(ctx, &kvringv1.HasRequest{Caller: caller, Namespace: ref, Ids: [][]byte{ch.ID},
		Pin: &kvringv1.LeasePin{LeaseId: 77, TtlMs: 60_000}})
	if err != nil || !has.GetHeld()[0] || has.GetLeaseTtlMs() == 0 {
		t.Fatalf("has with a pin: %v %v", has, err)
	}
	rm, err := peer.Remove(ctx, &kvringv1.RemoveRequest{Caller: caller, Namespace: ref, Ids: [][]byte{ch.ID}})
	if err != nil || rm.GetRemoved()[0] || !rm.GetPinned()[0] {
		t.Fatalf("remove of a pinned chunk: %v %v", rm, err)
	}
	if _, err := peer.Unpin(ctx, &kvringv1.UnpinRequest{Caller: caller, LeaseIds: []uint64{77}}); err != nil {
		t.Fatal(err)
	}
	drop, err := peer.Remove(ctx, &kvringv1.RemoveRequest{Caller: caller, Namespace: ref, DropNamespace: true})
	if err != nil || drop.GetChunks() != 1 {
		t.Fatalf("drop: %v %v", drop, err)
	}
	if c.Nodes[0].Registry.Get(ref.GetName()) != nil {
		t.Fatal("the dropped namespace is still registered")
	}
}
