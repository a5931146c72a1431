package coord_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/crc32c"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/internal/chunkcopy"
	"github.com/kvring/kvring/node/internal/clustertest"
	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// TestAPutIsStoredOnEveryOwnerAndHeldOnceStored: with R=2 a put names
// both owners as holders, both hold it sealed, every coordinator reads it
// back, and a second put (eager or not) needs no bytes: already held.
func TestAPutIsStoredOnEveryOwnerAndHeldOnceStored(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{})
	ref := c.Register(t, "put/owners", 2, 2)
	var chunks []clustertest.Chunk
	for n := range uint64(12) {
		chunks = append(chunks, clustertest.ChunkOf(100+n, 3000+int(n)*500))
	}
	res := put(t, c, 0, ref, chunks...)
	rg := c.Ring()
	for i, r := range res {
		var want []string
		for _, m := range rg.Owners(ref.GetName(), chunks[i].ID, 2) {
			want = append(want, m.ID)
		}
		slices.Sort(want)
		if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED || r.GetDegraded() || !slices.Equal(holders(r), want) {
			t.Fatalf("chunk %d: %+v, want stored on %v", i, r, want)
		}
		for _, id := range want {
			if !holds(c.NodeOf(id), ref, chunks[i].ID) {
				t.Fatalf("chunk %d: holder %s does not hold it", i, id)
			}
		}
	}
	for i := range c.Nodes {
		got, err := clustertest.Get(context.Background(), c.Cache(t, i), ref, clustertest.IDs(chunks), nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, g := range got {
			if string(g.Data) != string(chunks[k].Data) {
				t.Fatalf("node %d chunk %d: %+v", i, k, g.Header)
			}
		}
	}
	for _, eager := range []bool{false, true} {
		again, err := clustertest.Put(context.Background(), c.Cache(t, 1), ref, chunks, clustertest.PutOptions{Eager: eager})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range again {
			if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD || len(r.GetHolders()) != 2 {
				t.Fatalf("eager %v, chunk %d again: %+v", eager, i, r)
			}
		}
	}
}

// TestAChunkWhoseBytesFailTheirChecksumIsNeverStored: an eager put whose
// bytes do not match the declared checksum fails the chunk, with no
// holder.
func TestAChunkWhoseBytesFailTheirChecksumIsNeverStored(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: 2})
	ref := c.Register(t, "put/refused", 2, 1)
	bad := clustertest.ChunkOf(3, 1000)
	stream, err := c.Cache(t, 0).Put(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ref3 := bad.Ref()
	ref3.Crc32C++ // declared wrong: the owner's check fails it
	_ = stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{Namespace: ref,
		Chunks: []*kvringv1.ChunkRef{ref3}, Eager: true}}})
	_ = transfer.SplitFrames(0, bad.Data, transfer.MaxFrameBytes, func(f *kvringv1.DataFrame) error {
		return stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: f}})
	})
	_ = stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}})
	m, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if r := m.GetResult().GetResults()[0]; r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_FAILED || len(r.GetHolders()) != 0 {
		t.Fatalf("a chunk whose bytes fail their checksum: %+v", r)
	}
	for _, n := range c.Nodes {
		if holds(n, ref, bad.ID) {
			t.Fatalf("node %s holds a chunk whose bytes failed their checksum", n.ID)
		}
	}
}

// TestPutsRefuseBadInput: a stream without begin, a batch with a
// duplicate id, an unknown namespace and a stream that ends before the
// bytes are whole end the call with the code that says so, and nothing is
// stored.
func TestPutsRefuseBadInput(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: 2})
	ref := c.Register(t, "put/bad", 1, 1)
	ch := clustertest.ChunkOf(1, 2000)
	cache := c.Cache(t, 0)
	_, err := clustertest.Put(context.Background(), cache, ref, []clustertest.Chunk{ch, ch}, clustertest.PutOptions{})
	if !errors.Is(transfer.FromStatus(err), transfer.ErrInvalidArgument) {
		t.Fatalf("a duplicate id: %v", err)
	}
	_, err = clustertest.Put(context.Background(), cache, &kvringv1.NamespaceRef{Name: "nope", Fingerprint: []byte{1}}, []clustertest.Chunk{ch}, clustertest.PutOptions{})
	if !errors.Is(transfer.FromStatus(err), transfer.ErrUnknownNamespace) {
		t.Fatalf("an unknown namespace: %v", err)
	}
	stream, err := cache.Put(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}})
	if _, err := stream.Recv(); !errors.Is(transfer.FromStatus(err), transfer.ErrInvalidArgument) {
		t.Fatalf("a stream without begin: %v", err)
	}
	stream, err = cache.Put(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{Namespace: ref,
		Chunks: []*kvringv1.ChunkRef{ch.Ref()}, Eager: true}}})
	_ = stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: &kvringv1.DataFrame{Index: 0, Data: ch.Data[:100]}}})
	_ = stream.CloseSend()
	if _, err := stream.Recv(); err == nil {
		t.Fatal("a stream that ended before the bytes were whole succeeded")
	}
	for _, n := range c.Nodes {
		testutil.Eventually(t, "the short put's stage to be freed", 30*time.Second, func() bool { return !staging(n, ref, ch.ID) })
		if holds(n, ref, ch.ID) {
			t.Fatalf("node %s holds a chunk no put completed", n.ID)
		}
	}
}

// TestAStalledPutIsEndedAndFreesWhatItStaged: an engine that sends begin
// and then nothing for IdleTimeout has its put ended, and what the owners
// staged for it is freed.
func TestAStalledPutIsEndedAndFreesWhatItStaged(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: 2, Coord: func(_ int, cfg *coord.Config) { cfg.IdleTimeout = 200 * time.Millisecond }})
	ref := c.Register(t, "put/idle", 2, 1)
	ch := clustertest.ChunkOf(7, 5000)
	stream, err := c.Cache(t, 0).Put(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{Namespace: ref,
		Chunks: []*kvringv1.ChunkRef{ch.Ref()}}}})
	if m, err := stream.Recv(); err != nil || len(m.GetNeed().GetNeed()) != 1 {
		t.Fatalf("need: %v %v", m, err)
	}
	if _, err := stream.Recv(); !errors.Is(transfer.FromStatus(err), context.DeadlineExceeded) {
		t.Fatalf("a stalled put ended with %v, want DeadlineExceeded", err)
	}
	for _, n := range c.Nodes {
		testutil.Eventually(t, "the stalled put's stage to be freed", 30*time.Second, func() bool { return !staging(n, ref, ch.ID) })
	}
}

// TestAPutWaitsForAnotherWriterOfTheSameChunk: a put that finds the
// owner staging the chunk for another writer waits for that write: already
// held once it seals the chunk, failed (ABORTED: retry) when it ends
// without storing it.
func TestAPutWaitsForAnotherWriterOfTheSameChunk(t *testing.T) {
	t.Parallel()
	polled := make(chan struct{}, 16)
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: 2, Wrap: func(i int, p kvringv1.PeerServer) kvringv1.PeerServer {
		if i != 1 {
			return p
		}
		return &stagingPolls{PeerServer: p, polled: polled}
	}})
	ref := c.Register(t, "put/busy", 1, 1)
	owner := c.Nodes[1]
	for k, seal := range []bool{true, false} {
		ch := chunkOwnedBy(t, c, ref.GetName(), 1, uint64(1000*k), 4000, ids(owner))
		// The other writer: a prepare on the owner, in process, that has
		// staged the chunk and not voted yet.
		p, need, _, err := owner.Owner.NewPrepare(ref, []*kvringv1.ChunkRef{ch.Ref()}, nil)
		if err != nil || len(need) != 1 {
			t.Fatalf("the other writer's prepare: %v %v", need, err)
		}
		done := make(chan *kvringv1.PutChunkResult, 1)
		go func() {
			res, err := clustertest.Put(context.Background(), c.Cache(t, 0), ref, []clustertest.Chunk{ch}, clustertest.PutOptions{})
			if err != nil {
				t.Error(err)
				done <- nil
				return
			}
			done <- res[0]
		}()
		<-polled // the put found the chunk busy and asks whether the other write is done
		if seal {
			if err := p.Frame(transfer.Frame{Index: 0, Data: [][]byte{ch.Data}}); err != nil {
				t.Fatal(err)
			}
			votes := owner.Owner.EndPrepare(p)
			owner.Owner.Commit("", ref, []*kvringv1.StagedChunk{{StageToken: votes[0].GetStageToken(), Id: ch.ID}})
		} else {
			p.Abort()
		}
		r := <-done
		switch {
		case r == nil:
		case seal && (r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD || !slices.Equal(holders(r), sorted(owner))):
			t.Fatalf("the other write sealed it: %+v, want already held by the owner", r)
		case !seal && (r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_FAILED || !transfer.CodeIs(r.GetCode(), store.ErrBusy)):
			t.Fatalf("the other write aborted: %+v, want failed busy", r)
		}
		for len(polled) > 0 {
			<-polled
		}
	}
}

// stagingPolls signals every Has that asks about staging (a put waiting
// for another writer polls so).
type stagingPolls struct {
	kvringv1.PeerServer
	polled chan struct{}
}

func (s *stagingPolls) Has(ctx context.Context, req *kvringv1.HasRequest) (*kvringv1.HasResponse, error) {
	if req.GetReportStaging() {
		select {
		case s.polled <- struct{}{}:
		default:
		}
	}
	return s.PeerServer.Has(ctx, req)
}

// TestAPublishStagesThisNodesShareInItsBlobAndSendsTheRest: a publish of
// blobs on the coordinator is stored on every owner (this node's copy is
// the blob's slot, the peer's sent from it) and read back by any node; a
// blob whose size differs from its chunk's is bad input.
func TestAPublishStagesThisNodesShareInItsBlobAndSendsTheRest(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{})
	ref := c.Register(t, "publish/blobs", 2, 2)
	n0 := c.Nodes[0]
	chunks := []clustertest.Chunk{
		chunkOwnedBy(t, c, ref.GetName(), 2, 1, 3<<20, ids(c.Nodes[0], c.Nodes[1])), // this node's and a peer's: frames of 1 MiB
		chunkOwnedBy(t, c, ref.GetName(), 2, 1, 5000, ids(c.Nodes[1], c.Nodes[2])),  // peers' only
	}
	blobs := make([]*store.Blob, len(chunks))
	refs := make([]*kvringv1.ChunkRef, len(chunks))
	for i, ch := range chunks {
		b, err := n0.Store.CreateBlob(int64(len(ch.Data)))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Free()
		copy(b.Bytes(), ch.Data)
		blobs[i], refs[i] = b, ch.Ref()
	}
	_, res, err := n0.Coord.Publish(context.Background(), &kvringv1.PutBegin{Namespace: ref, Chunks: refs}, blobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED || len(r.GetHolders()) != 2 {
			t.Fatalf("chunk %d: %+v", r.GetIndex(), r)
		}
		_ = i
	}
	got, err := clustertest.Get(context.Background(), c.Cache(t, 2), ref, clustertest.IDs(chunks), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if string(g.Data) != string(chunks[i].Data) {
			t.Fatalf("chunk %d read back: %+v", i, g.Header)
		}
	}
	if _, _, err := n0.Coord.Publish(context.Background(), &kvringv1.PutBegin{Namespace: ref, Chunks: refs[:1]}, blobs[1:]); !errors.Is(err, transfer.ErrInvalidArgument) {
		t.Fatalf("a blob of the wrong size: %v", err)
	}
	if _, _, err := n0.Coord.Publish(context.Background(), &kvringv1.PutBegin{Namespace: ref, Chunks: refs}, blobs[:1]); !errors.Is(err, transfer.ErrInvalidArgument) {
		t.Fatalf("fewer blobs than chunks: %v", err)
	}
}

// TestACopyIsSealedOnTheMemberOrSaysWhyNot: Copy writes chunks this node
// holds to a member: nil once sealed there, store.ErrAlreadyHeld when the
// member held it, an error wrapping ErrUnavailable when the member cannot
// be reached; a spread copy carries its mark to the member.
func TestACopyIsSealedOnTheMemberOrSaysWhyNot(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{PeerTimeout: 5 * time.Second})
	schema := &kvringv1.NamespaceSchema{Model: "m", Dtype: "bf16", TokensPerChunk: 16, ChunksPerGroup: 2}
	ref := c.RegisterSchema(t, "copy/to", schema, 1, 1)
	from, to := c.Nodes[0], c.Nodes[1]
	rec := from.Registry.Get(ref.GetName())
	ns := namespace.StoreName(ref.GetName(), ref.GetFingerprint())
	chunks := []clustertest.Chunk{clustertest.ChunkOf(1, 2<<20), clustertest.ChunkOf(2, 700)}
	var cc []chunkcopy.Chunk
	for _, ch := range chunks {
		w, err := from.Store.Stage(ns, storeID(t, ch.ID), int64(len(ch.Data)), crc32c.Checksum(ch.Data))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(ch.Data); err != nil {
			t.Fatal(err)
		}
		if err := w.Seal(); err != nil {
			t.Fatal(err)
		}
		v, err := from.Store.Get(ns, storeID(t, ch.ID))
		if err != nil {
			t.Fatal(err)
		}
		defer v.Release()
		cc = append(cc, chunkcopy.Chunk{View: v, ID: storeID(t, ch.ID), Place: storeID(t, chunks[0].ID)})
	}
	errs := from.Coord.Copy(context.Background(), to.Member(), rec, cc, chunkcopy.Spread{})
	for i, err := range errs {
		if err != nil || !holds(to, ref, chunks[i].ID) {
			t.Fatalf("copy of chunk %d: %v", i, err)
		}
	}
	held, _, err := from.Coord.Has(context.Background(), to.Member(), rec, clustertest.IDs(chunks), nil)
	if err != nil || !slices.Equal(held, []bool{true, true}) {
		t.Fatalf("Has after the copy: %v %v", held, err)
	}
	for i, err := range from.Coord.Copy(context.Background(), to.Member(), rec, cc, chunkcopy.Spread{}) {
		if !errors.Is(err, store.ErrAlreadyHeld) {
			t.Fatalf("copy of chunk %d again: %v, want already held", i, err)
		}
	}
	third := c.Nodes[2]
	for i, err := range from.Coord.Copy(context.Background(), third.Member(), rec, cc[:1], chunkcopy.Spread{Width: 3, TTL: time.Minute}) {
		if err != nil || !holds(third, ref, chunks[i].ID) {
			t.Fatalf("spread copy of chunk %d: %v", i, err)
		}
	}
	c.Net.Cut(from.ID, third.ID)
	gone := ring.Member{ID: third.ID, Addr: third.Addr}
	for i, err := range from.Coord.Copy(context.Background(), gone, rec, cc[1:], chunkcopy.Spread{}) {
		if !errors.Is(err, transfer.ErrUnavailable) {
			t.Fatalf("copy of chunk %d to a cut member: %v, want unavailable", i, err)
		}
	}
	if _, _, err := from.Coord.Has(context.Background(), gone, rec, clustertest.IDs(chunks), nil); !errors.Is(err, transfer.ErrUnavailable) {
		t.Fatalf("Has of a cut member: %v", err)
	}
	from.Coord.Unpin(context.Background(), to.Member(), []uint64{1})
}
