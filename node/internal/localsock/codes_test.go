package localsock

import (
	"context"
	"sync"
	"testing"

	"github.com/kvring/kvring/client/local"
	"github.com/kvring/kvring/loadtest"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"google.golang.org/grpc/codes"
)

// busyCluster is a Cluster whose Publish fails every chunk with code
// ABORTED (another write held it up) the first time it sees its id, and
// stores it after.
type busyCluster struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (b *busyCluster) RegisterNamespace(context.Context, *kvringv1.RegisterNamespaceRequest) (*kvringv1.RegisterNamespaceResponse, error) {
	return &kvringv1.RegisterNamespaceResponse{Namespace: &kvringv1.NamespaceRecord{Name: "ns", Fingerprint: []byte{1}}}, nil
}

func (b *busyCluster) Publish(_ context.Context, begin *kvringv1.PutBegin, _ []*store.Blob) (PutOutcome, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := PutOutcome{Epoch: 5}
	for i, ch := range begin.GetChunks() {
		r := &kvringv1.PutChunkResult{Index: uint32(i), Status: kvringv1.PutStatus_PUT_STATUS_STORED,
			Holders: []*kvringv1.NodeRef{{NodeId: "n1", GrpcAddr: "127.0.0.1:1"}}}
		if !b.seen[string(ch.GetId())] {
			b.seen[string(ch.GetId())] = true
			r = &kvringv1.PutChunkResult{Index: uint32(i), Status: kvringv1.PutStatus_PUT_STATUS_FAILED,
				Code: uint32(codes.Aborted), Reason: "another write of this chunk is under way"}
		}
		out.Results = append(out.Results, r)
	}
	return out, nil
}

func (b *busyCluster) Lookup(context.Context, *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	return &kvringv1.LookupResponse{}, nil
}

func (b *busyCluster) ReleaseLease(context.Context, uint64) (bool, error) { return false, nil }

func (b *busyCluster) Get(context.Context, *kvringv1.GetRequest, func(int, int64) ([]byte, error),
	func(int, *kvringv1.ChunkHeader, bool, string)) error {
	return nil
}

func (b *busyCluster) Close() error { return nil }

// TestPublishRepliesCarryEachChunksCode: a chunk failed with ABORTED
// carries code 10 in both framings (PublishResult.Busy), and a stored one
// 0; publishing it again stores it.
func TestPublishRepliesCarryEachChunksCode(t *testing.T) {
	leakCheck(t)
	st := testStore(t, 16<<20)
	s := startServer(t, st, func(c *Config) { c.Cluster = &busyCluster{seen: map[string]bool{}} })
	for k, useJSON := range []bool{false, true} {
		c, err := local.Dial(context.Background(), local.Config{Path: s.Path(), JSON: useJSON})
		if err != nil {
			t.Fatal(err)
		}
		ns := local.Namespace{Name: "ns", Fingerprint: []byte{1}}
		ids := [][32]byte{{byte(k), 1}, {byte(k), 2}}
		for round, want := range []string{"failed", "stored"} {
			bs, err := c.CreateBlobs([]int64{100, 200})
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.SealPublishAndDelete(ns, ids, []uint64{bs[0].ID, bs[1].ID}, nil)
			if err != nil || len(res) != 2 {
				t.Fatalf("JSON %v round %d: %+v %v", useJSON, round, res, err)
			}
			for i, r := range res {
				busy := want == "failed"
				wantCode := map[bool]uint32{true: uint32(codes.Aborted), false: 0}[busy]
				if r.Status != want || r.Code != wantCode || r.Busy() != busy {
					t.Fatalf("JSON %v round %d chunk %d: %+v, want %s with code %d", useJSON, round, i, r, want, wantCode)
				}
			}
		}
		c.Close()
	}
}

// TestBinaryPublishWithoutTheCodesFlagKeepsTheOldLayout: a client from
// before the codes (no flag bit 3) gets the reply it knows.
func TestBinaryPublishWithoutTheCodesFlagKeepsTheOldLayout(t *testing.T) {
	leakCheck(t)
	st := testStore(t, 16<<20)
	s := startServer(t, st, func(c *Config) { c.Cluster = &busyCluster{seen: map[string]bool{}} })
	c := dial(t, s)
	defer c.Close()
	for _, flags := range []byte{0, binPublishCodes} {
		bl, err := c.CreateBlob(100)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Seal(bl.ID); err != nil {
			t.Fatal(err)
		}
		id := bl.ID
		r := rawDial(t, s)
		r.register()
		b := append(u32([]byte{binMagic, binPublish, flags}, 2), "ns"...)
		b = u32(b, 0)
		b = u32(b, 1)
		b = append(b, make([]byte, 32)...)
		b[len(b)-1] = flags + 1 // a new id per flag
		b = u32(u64(b, id), 0)
		r.sendRaw(b)
		op, rest := recvBinary(t, r)
		reason := "another write of this chunk is under way"
		want := u32(u64(nil, 5), 1)
		want = append(want, 3, 0) // failed, not degraded
		if flags != 0 {
			want = u32(want, uint32(codes.Aborted))
		}
		want = append(u32(want, uint32(len(reason))), reason...)
		want = append(u32(want, 0), 0) // no holders, nothing created
		if op != binPublish|binReply || string(rest) != string(want) {
			t.Fatalf("flags %#x: reply op %#x\n%x\nwant\n%x", flags, op, rest, want)
		}
	}
}

// TestPublishCreatesAfterTheConsumeWhenThereWasNoRoom: the next blobs are
// created while the publish runs; when the node's memory only has room for
// them once the published blobs are consumed, they are created then.
func TestPublishCreatesAfterTheConsumeWhenThereWasNoRoom(t *testing.T) {
	leakCheck(t)
	st := testStore(t, 16<<20)
	s := startServer(t, st, func(c *Config) { c.Cluster = &busyCluster{seen: map[string]bool{}} })
	c := dial(t, s)
	defer c.Close()
	const size = 6 << 20
	bs, err := c.CreateBlobs([]int64{size, size})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBlobs([]int64{size}); err == nil {
		t.Fatal("a third blob fit: the test needs a store with room for two only")
	}
	ns := local.Namespace{Name: "ns", Fingerprint: []byte{1}}
	res, next, err := c.SealPublishAndCreate(ns, [][32]byte{{1}, {2}}, []uint64{bs[0].ID, bs[1].ID}, nil, []int64{size, size})
	if err != nil || len(res) != 2 || len(next) != 2 {
		t.Fatalf("SealPublishAndCreate: %+v, %d blobs, %v", res, len(next), err)
	}
	if got := st.Stats().Blobs; got != 2 {
		t.Fatalf("%d blobs in the store, want the 2 new ones", got)
	}
}

// TestSocketBackendResendsBusyChunksOnce: loadtest.Socket, a put over
// client/local, publishes once more the chunks failed with ABORTED, as the
// gRPC SDK's put resends them.
func TestSocketBackendResendsBusyChunksOnce(t *testing.T) {
	leakCheck(t)
	st := testStore(t, 16<<20)
	s := startServer(t, st, func(c *Config) { c.Cluster = &busyCluster{seen: map[string]bool{}} })
	b, err := loadtest.NewSocket(context.Background(), loadtest.SocketConfig{Path: s.Path(), Namespace: "ns",
		Schema: local.Schema{Model: "m", TokensPerChunk: 16}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	out, err := b.Put(context.Background(), []loadtest.Chunk{{ID: loadtest.ChunkID{1}, Data: []byte("one")},
		{ID: loadtest.ChunkID{2}, Data: []byte("two")}})
	if err != nil || len(out) != 2 || out[0] != loadtest.Stored || out[1] != loadtest.Stored {
		t.Fatalf("Put: %v %v, want both stored after one resend", out, err)
	}
}
