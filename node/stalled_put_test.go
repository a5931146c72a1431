package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/client"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// TestAStalledPutIsEndedAndFreesWhatItStaged: an engine that declares
// chunks and then sends nothing has its put ended with DeadlineExceeded
// after PutIdleTimeout, the chunks it staged are freed at once (not at the
// end of the 30 s stage lease), and another engine's put is stored.
func TestAStalledPutIsEndedAndFreesWhatItStaged(t *testing.T) {
	t.Parallel()
	// 2s, not less: the idle limit applies to the other engine's healthy put
	// too, whose messages came 209ms apart on a loaded machine.
	tc := newTestClusterWith(t, 1, 16<<20, func(_ int, cfg *Config) { cfg.PutIdleTimeout = 2 * time.Second })
	nd := tc.nodes[0]
	good := testClient(t, nd.addr, 1, 1)
	fp, err := good.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(nd.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var refs []*kvringv1.ChunkRef
	for i := range 6 { // a client alone may stage three quarters of the 8 MiB budget
		ch := chunkOf(uint64(100+i), 1<<20)
		refs = append(refs, &kvringv1.ChunkRef{Id: ch.ID[:], Size: 1 << 20, Crc32C: store.Checksum(ch.Data)})
	}
	// Opened once the begin message is ready: a stream whose begin does not
	// come within PutIdleTimeout is ended too (TestAPutThatNeverBeginsIsEnded).
	stream, err := kvringv1.NewCacheClient(cc).Put(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{
		Namespace: &kvringv1.NamespaceRef{Name: "test/model", Fingerprint: fp}, Chunks: refs}}}); err != nil {
		t.Fatal(err)
	}
	need, err := stream.Recv()
	if err != nil || len(need.GetNeed().GetNeed()) != 6 {
		t.Fatalf("need: %v %v", need, err)
	}
	if staged := nd.st.Stats().StagedBytes; staged != 6<<20 {
		t.Fatalf("%d bytes staged for the stalled put, want 6 MiB", staged)
	}
	// Send nothing more: the node ends the call.
	_, err = stream.Recv()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the stalled put ended with %v, want DeadlineExceeded", err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the test's own deadline ended the call, not the node")
	}
	waitFor(t, "the stalled put's staged chunks to be freed", func() bool { return nd.st.Stats().StagedBytes == 0 })
	res, err := good.Put(context.Background(), []client.Chunk{chunkOf(1, 256<<10)})
	if err != nil || res[0].Status != client.Stored {
		t.Fatalf("another engine's put: %v %+v", err, res)
	}
}
