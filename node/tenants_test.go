package node

import (
	"context"
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

// openPut opens a Put stream on its own connection (its own client, as
// the node names them), sends a begin declaring n chunks of size bytes and
// waits for the need message. The stream's context ends with the test.
func openPut(t *testing.T, addr string, fp []byte, first uint64, n, size int) (kvringv1.Cache_PutClient, *kvringv1.PutNeed) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	var refs []*kvringv1.ChunkRef
	for i := range n {
		ch := chunkOf(first+uint64(i), size)
		refs = append(refs, &kvringv1.ChunkRef{Id: ch.ID[:], Size: uint64(size), Crc32C: store.Checksum(ch.Data)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	stream, err := kvringv1.NewCacheClient(cc).Put(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{
		Namespace: &kvringv1.NamespaceRef{Name: "test/model", Fingerprint: fp}, Chunks: refs}}}); err != nil {
		t.Fatal(err)
	}
	m, err := stream.Recv()
	if err != nil || m.GetNeed() == nil {
		t.Fatalf("need: %v %v", m, err)
	}
	return stream, m.GetNeed()
}

// TestAStalledPutCannotBlockAnotherClientsPuts: a Put declaring more
// chunks than --max-staged and sending no bytes used to take the whole
// budget, and every other client's put was rejected ("writes in progress
// hold ...") until the idle timeout. Now the stalled client holds at most
// its share while its stream is open, and the others' puts are stored.
func TestAStalledPutCannotBlockAnotherClientsPuts(t *testing.T) {
	t.Parallel()
	// 16 MiB of memory: --max-staged is 8 MiB. The idle timeout is long:
	// the stall lasts the whole test.
	tc := newTestClusterWith(t, 1, 16<<20, func(_ int, cfg *Config) { cfg.PutIdleTimeout = time.Minute })
	nd := tc.nodes[0]
	victim := testClient(t, nd.addr, 1, 1)
	fp, err := victim.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, need := openPut(t, nd.addr, fp, 1000, 8, 1<<20)
	for i := range 8 {
		res, err := victim.Put(context.Background(), []client.Chunk{chunkOf(uint64(i), 256<<10)})
		if err != nil || res[0].Status != client.Stored {
			t.Fatalf("put %d of another client while one stalls: %v %+v", i, err, res)
		}
	}
	if got := len(need.GetNeed()); got != 6 {
		t.Fatalf("the stalled put staged %d of its 8 chunks of 1 MiB, want 6 (three quarters of the 8 MiB budget)", got)
	}
	if staged := nd.st.Stats().StagedBytes; staged != 6<<20 {
		t.Fatalf("%d bytes staged, want the stalled put's 6 MiB still held", staged)
	}
}

// TestATricklingPutIsEnded: a put whose engine sends one byte per chunk
// every 100 ms never goes idle, and used to hold its staged chunks for the
// whole 30 s stage lease. Now it is ended once PutIdleTimeout has passed
// with its bytes arriving slower than PutMinRate, and what it staged is
// freed.
func TestATricklingPutIsEnded(t *testing.T) {
	t.Parallel()
	tc := newTestClusterWith(t, 1, 16<<20, func(_ int, cfg *Config) {
		cfg.PutIdleTimeout = time.Second
		cfg.PutMinRate = 1 << 20
	})
	nd := tc.nodes[0]
	fp, err := testClient(t, nd.addr, 1, 1).Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stream, need := openPut(t, nd.addr, fp, 2000, 4, 1<<20)
	if len(need.GetNeed()) != 4 {
		t.Fatalf("need %v", need)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // far below the 30 s stage lease
	defer cancel()
	go func() { // the attack: a byte of each chunk, one message every 100 ms
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for off := uint64(0); ; off++ {
			for idx := range uint32(4) {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: &kvringv1.DataFrame{
					Index: idx, Offset: off, Data: []byte{chunkOf(2000+uint64(idx), 1<<20).Data[off]}}}}) != nil {
					return
				}
			}
		}
	}()
	recvd := make(chan error, 1)
	go func() { _, err := stream.Recv(); recvd <- err }()
	select {
	case err := <-recvd:
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("the trickling put ended with %v, want DeadlineExceeded", err)
		}
	case <-ctx.Done():
		t.Fatal("a put trickling one byte per 100 ms was still open after 20 s")
	}
	waitFor(t, "the trickling put's staged chunks to be freed", func() bool { return nd.st.Stats().StagedBytes == 0 })
}

// TestAPinHoarderCannotFreezeOtherClientsPins: a client that pins with its
// lookups until --max-pinned is full used to make every other client's
// pinning lookups report 0 held (plain lookups: all held). Now it is held
// to its share, and another client's pinning lookup holds all 20 chunks.
func TestAPinHoarderCannotFreezeOtherClientsPins(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 1, 16<<20) // --max-pinned: 8 MiB
	nd := tc.nodes[0]
	hoarder, victim := testClient(t, nd.addr, 1, 1), testClient(t, nd.addr, 1, 1)
	ctx := context.Background()
	var hoard, mine []client.ChunkID
	for i := range 140 {
		ch := chunkOf(uint64(3000+i), 64<<10)
		if res, err := victim.Put(ctx, []client.Chunk{ch}); err != nil || res[0].Status != client.Stored {
			t.Fatalf("put %d: %v %+v", i, err, res)
		}
		if i < 120 {
			hoard = append(hoard, ch.ID)
		} else {
			mine = append(mine, ch.ID)
		}
	}
	pinned := 0
	for i := 0; i < len(hoard); i += 20 {
		lr, err := hoarder.Lookup(ctx, hoard[i:i+20], time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if lr.Lease != 0 {
			pinned += lr.Held
		}
	}
	lr, err := victim.Lookup(ctx, mine, time.Minute)
	if err != nil || lr.Held != 20 || lr.Lease == 0 {
		t.Fatalf("another client's pinning lookup held %d of 20 (lease %d) while one hoards: %v", lr.Held, lr.Lease, err)
	}
	if pinned == 0 || pinned > 96 {
		t.Fatalf("the hoarder pinned %d chunks of 64 KiB, want some and at most 96 (three quarters of 8 MiB)", pinned)
	}
}

// TestOwnersChargeTheEngineNotItsCoordinator: with two nodes, a stalled
// engine and a well-behaved one both write through node 0 (the SDK would
// go to each chunk's owner; these streams do not); node 1 stages its part
// of both as their owner. It must tell them apart (the coordinator names
// the engine in its Peer calls), or the stalled engine's share on node 1
// would be the other's too and its chunks rejected there.
func TestOwnersChargeTheEngineNotItsCoordinator(t *testing.T) {
	t.Parallel()
	tc := newTestClusterWith(t, 2, 16<<20, func(_ int, cfg *Config) { cfg.PutIdleTimeout = time.Minute })
	fp, err := testClient(t, tc.nodes[0].addr, 1, 1).Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, need := openPut(t, tc.nodes[0].addr, fp, 4000, 40, 1<<20)
	for i, nd := range tc.nodes { // 40 chunks: each node is asked for more than a share's 6 MiB
		if staged := nd.st.Stats().StagedBytes; staged != 6<<20 {
			t.Fatalf("node %d stages %d bytes of the stalled put, want its share of 6 MiB (need %v)", i, staged, need.GetNeed())
		}
	}
	// 2 MiB in all: within the quarter of each node's budget a second client always finds free.
	stream, need := openPut(t, tc.nodes[0].addr, fp, 4100, 8, 256<<10)
	if got := len(need.GetNeed()); got != 8 {
		t.Fatalf("another engine's put through the same coordinator staged %d of its 8 chunks: %v", got, need.GetSettled())
	}
	for i := range 8 {
		if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: &kvringv1.DataFrame{
			Index: uint32(i), Data: chunkOf(uint64(4100+i), 256<<10).Data}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}}); err != nil {
		t.Fatal(err)
	}
	m, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range m.GetResult().GetResults() {
		if r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED {
			t.Fatalf("another engine's chunk through the same coordinator: %v", r)
		}
	}
}
