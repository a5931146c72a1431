package node

import (
	"context"
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvring/kvring/client"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// TestAnEagerPutIsOneRoundTrip: an engine that sends begin (eager), every
// chunk's bytes and end without waiting hears exactly one message back, the
// result, with every chunk's outcome: the new ones stored on their owners
// (the bytes of the chunk already held are discarded), the held one
// already_held.
func TestAnEagerPutIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, 16<<20)
	c := testClient(t, tc.nodes[0].addr, 1, 1)
	held := chunkOf(1, 4096)
	if _, err := c.Put(context.Background(), []client.Chunk{held}); err != nil {
		t.Fatal(err)
	}
	fp, err := c.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	chunks := []client.Chunk{held, chunkOf(2, 100_000), chunkOf(3, 3<<20)} // the last spans several frames
	cc, err := grpc.NewClient(tc.nodes[0].addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	refs := make([]*kvringv1.ChunkRef, len(chunks))
	for i, ch := range chunks {
		refs[i] = &kvringv1.ChunkRef{Id: ch.ID[:], Size: uint64(len(ch.Data)), Crc32C: store.Checksum(ch.Data)}
	}
	// Opened once the begin message is ready (a begin that does not come
	// within PutIdleTimeout ends the put).
	stream, err := kvringv1.NewCacheClient(cc).Put(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	send := func(m *kvringv1.PutRequest) {
		t.Helper()
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{
		Namespace: &kvringv1.NamespaceRef{Name: "test/model", Fingerprint: fp}, Chunks: refs, Eager: true}}})
	for i, ch := range chunks {
		for off := 0; off < len(ch.Data); off += 1 << 20 {
			end := min(off+1<<20, len(ch.Data))
			send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: &kvringv1.DataFrame{
				Index: uint32(i), Offset: uint64(off), Data: ch.Data[off:end]}}})
		}
	}
	send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}})
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var msgs []*kvringv1.PutResponse
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) != 1 || msgs[0].GetResult() == nil {
		t.Fatalf("got %d messages (%v), want exactly one result", len(msgs), msgs)
	}
	want := map[uint32]kvringv1.PutStatus{0: kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD,
		1: kvringv1.PutStatus_PUT_STATUS_STORED, 2: kvringv1.PutStatus_PUT_STATUS_STORED}
	res := msgs[0].GetResult().GetResults()
	if len(res) != len(chunks) {
		t.Fatalf("%d outcomes for %d chunks: %v", len(res), len(chunks), res)
	}
	for _, r := range res {
		if r.GetStatus() != want[r.GetIndex()] {
			t.Fatalf("chunk %d: %v, want %v", r.GetIndex(), r, want[r.GetIndex()])
		}
	}
	got, err := c.Get(context.Background(), []client.ChunkID{chunks[1].ID, chunks[2].ID})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !g.Found || string(g.Data) != string(chunks[i+1].Data) {
			t.Fatalf("chunk %d: found %v (%s)", i+1, g.Found, g.Reason)
		}
	}
}
