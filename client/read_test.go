package client

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/internal/testutil"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// scriptedCache answers Get with the chunks it holds, in frames of the given
// sizes; a chunk listed in damage is sent with one byte flipped (the header
// keeps the right checksum).
type scriptedCache struct {
	kvringv1.UnimplementedCacheServer
	chunks map[ChunkID][]byte
	damage map[ChunkID]bool
	frames []int // frame sizes, cycled
	// declare, when set, replaces a chunk's size in its header (a lying node).
	declare map[ChunkID]uint64
	limits  *kvringv1.Limits
}

func (s *scriptedCache) RegisterNamespace(_ context.Context, req *kvringv1.RegisterNamespaceRequest) (*kvringv1.RegisterNamespaceResponse, error) {
	return &kvringv1.RegisterNamespaceResponse{Epoch: 1, Created: true, Limits: s.limits, Namespace: &kvringv1.NamespaceRecord{
		Name: req.GetName(), Fingerprint: bytes.Repeat([]byte{7}, 32)}}, nil
}

func (s *scriptedCache) Get(req *kvringv1.GetRequest, stream grpc.ServerStreamingServer[kvringv1.GetResponse]) error {
	for i, raw := range req.GetIds() {
		id := ChunkID(raw)
		data, ok := s.chunks[id]
		if !ok {
			if err := stream.Send(&kvringv1.GetResponse{Epoch: 1, Msg: &kvringv1.GetResponse_Header{Header: &kvringv1.ChunkHeader{
				Index: uint32(i), Status: kvringv1.ReadStatus_READ_STATUS_NOT_FOUND, Reason: "not held"}}}); err != nil {
				return err
			}
			continue
		}
		size := uint64(len(data))
		if d, ok := s.declare[id]; ok {
			size = d
		}
		if err := stream.Send(&kvringv1.GetResponse{Epoch: 1, Msg: &kvringv1.GetResponse_Header{Header: &kvringv1.ChunkHeader{
			Index: uint32(i), Status: kvringv1.ReadStatus_READ_STATUS_FOUND,
			Chunk: &kvringv1.ChunkRef{Id: raw, Size: size, Crc32C: store.Checksum(data)}}}}); err != nil {
			return err
		}
		sent := bytes.Clone(data)
		if s.damage[id] {
			sent[len(sent)/2] ^= 0x10
		}
		for off, k := 0, 0; off < len(sent); k++ {
			n := min(s.frames[k%len(s.frames)], len(sent)-off)
			if err := stream.Send(&kvringv1.GetResponse{Epoch: 1, Msg: &kvringv1.GetResponse_Data{Data: &kvringv1.DataFrame{
				Index: uint32(i), Offset: uint64(off), Data: sent[off : off+n]}}}); err != nil {
				return err
			}
			off += n
		}
	}
	return nil
}

// TestGetReturnsVerifiedBytesOrAMiss: the client reads chunks from frames of
// any size (it copies them straight out of gRPC's buffers with the checksum
// computed on the way) and hands back only bytes that match the checksum the
// node declared: a chunk damaged in transit is a miss with the reason, never
// data.
func TestGetReturnsVerifiedBytesOrAMiss(t *testing.T) {
	t.Parallel()
	ids := testIDs(4)
	var cids [4]ChunkID
	for i := range cids {
		copy(cids[i][:], ids[i])
	}
	good := bytes.Repeat([]byte("kvring-"), 500_000) // 3.5 MB: several 1 MiB frames
	small := []byte("x")
	srv := &scriptedCache{
		chunks: map[ChunkID][]byte{cids[0]: good, cids[1]: good[:2<<20], cids[2]: small},
		damage: map[ChunkID]bool{cids[1]: true},
		frames: []int{1 << 20, 12_345, 1, 700_000},
	}
	c := fakeNodeClient(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	res, err := c.Get(ctx, cids[:])
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; !r.Found || !bytes.Equal(r.Data, good) {
		t.Fatalf("chunk 0: found %v, %d bytes (%s); want the %d bytes sent", r.Found, len(r.Data), r.Reason, len(good))
	}
	if r := res[1]; r.Found || r.Data != nil || !strings.Contains(r.Reason, "checksum") {
		t.Fatalf("damaged chunk 1: found %v, %d bytes, reason %q; want a miss naming the checksum", r.Found, len(r.Data), r.Reason)
	}
	if r := res[2]; !r.Found || !bytes.Equal(r.Data, small) {
		t.Fatalf("chunk 2: found %v, %q", r.Found, r.Data)
	}
	if r := res[3]; r.Found || r.Reason != "not held" {
		t.Fatalf("chunk 3: found %v, reason %q; want a miss", r.Found, r.Reason)
	}
}

// TestGetIntoReadsIntoTheCallersBuffers: GetInto writes each found chunk
// into the buffer given for it and returns a prefix of that buffer, with the
// same checksum verification as Get; a buffer too short for its chunk is a
// miss naming both sizes (its frames are skipped, the next chunk still
// reads), and a damaged chunk is a miss whose Data is nil.
func TestGetIntoReadsIntoTheCallersBuffers(t *testing.T) {
	t.Parallel()
	ids := testIDs(6)
	var cids [6]ChunkID
	for i := range cids {
		copy(cids[i][:], ids[i])
	}
	big := bytes.Repeat([]byte("kvring-"), 300_000) // 2.1 MB: several frames
	small := []byte("tiny chunk")
	srv := &scriptedCache{
		chunks: map[ChunkID][]byte{cids[0]: big, cids[1]: big[:1<<20], cids[2]: small, cids[3]: big[:100_000],
			cids[5]: big[7:50_007]},
		damage: map[ChunkID]bool{cids[1]: true},
		frames: []int{1 << 20, 12_345, 1, 700_000},
	}
	c := fakeNodeClient(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	bufs := [][]byte{make([]byte, len(big)+10), make([]byte, 1<<20), make([]byte, 64), make([]byte, 99_999), make([]byte, 8),
		make([]byte, 50_000)}
	res, err := c.GetInto(ctx, cids[:], bufs)
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; !r.Found || !bytes.Equal(r.Data, big) || &r.Data[0] != &bufs[0][0] {
		t.Fatalf("chunk 0: found %v, %d bytes (%s); want the %d bytes sent, in the caller's buffer", r.Found, len(r.Data), r.Reason, len(big))
	}
	if r := res[1]; r.Found || r.Data != nil || !strings.Contains(r.Reason, "checksum") {
		t.Fatalf("damaged chunk 1: found %v, %d bytes, reason %q; want a miss naming the checksum", r.Found, len(r.Data), r.Reason)
	}
	if r := res[2]; !r.Found || !bytes.Equal(r.Data, small) || &r.Data[0] != &bufs[2][0] {
		t.Fatalf("chunk 2: found %v, %q; want %q in the caller's buffer", r.Found, r.Data, small)
	}
	if r := res[3]; r.Found || r.Data != nil || !strings.Contains(r.Reason, "100000 bytes") || !strings.Contains(r.Reason, "99999") {
		t.Fatalf("chunk 3 (buffer 1 byte short): found %v, reason %q; want a miss naming both sizes", r.Found, r.Reason)
	}
	if r := res[4]; r.Found || r.Reason != "not held" {
		t.Fatalf("chunk 4: found %v, reason %q; want a miss", r.Found, r.Reason)
	}
	if r := res[5]; !r.Found || !bytes.Equal(r.Data, big[7:50_007]) || &r.Data[0] != &bufs[5][0] {
		t.Fatalf("chunk 5 (after the skipped one): found %v, %d bytes (%s); want its bytes in the caller's buffer", r.Found, len(r.Data), r.Reason)
	}
	if _, err := c.GetInto(ctx, cids[:], bufs[:2]); err == nil || !strings.Contains(err.Error(), "2 buffers for 6 ids") {
		t.Fatalf("GetInto with 2 buffers for 6 ids: %v; want an error naming both counts", err)
	}
}

// abortingCache answers a Put's begin with "need everything", reads a single
// frame and then fails the call (or stalls), while the client still has
// frames queued.
type abortingCache struct {
	scriptedCache
	stall atomic.Bool // instead of failing, stop reading until the client gives up
}

func (a *abortingCache) Put(stream grpc.BidiStreamingServer[kvringv1.PutRequest, kvringv1.PutResponse]) error {
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	var need []uint32
	for i := range m.GetBegin().GetChunks() {
		need = append(need, uint32(i))
	}
	if err := stream.Send(&kvringv1.PutResponse{Epoch: 1, Msg: &kvringv1.PutResponse_Need{Need: &kvringv1.PutNeed{Need: need}}}); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil {
		return err
	}
	if a.stall.Load() {
		<-stream.Context().Done() // stop reading: the client's frames queue up behind flow control
		return stream.Context().Err()
	}
	// Not Unavailable: that would make the client re-check its connection,
	// which this test is not about.
	return status.Error(codes.Aborted, "owner gave up")
}

// TestAFailedPutHandsTheChunkBytesBack: Put sends chunk bytes without
// copying them (borrowed by gRPC until written or dropped), so it must not
// return while gRPC still holds any, even when the node fails the call with
// frames still queued behind flow control. An interceptor sees every frame
// Put lends; once Put has returned, gRPC must hold none of them (or hold
// for good one it dropped without handing back, a grpc-go leak). The bytes
// are then overwritten, as a caller reusing its buffers would (under -race a
// gRPC writer still copying them would be reported too).
//
// Client and node run in a synctest bubble on memNet: "for good" is checked
// exactly, by letting every goroutine run until it blocks and the fake clock
// run on past every timer that could still make gRPC let go of a frame.
func TestAFailedPutHandsTheChunkBytesBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memNet
		srv := &abortingCache{}
		gs := grpc.NewServer(grpc.MaxRecvMsgSize(4 << 20))
		kvringv1.RegisterCacheServer(gs, srv)
		healthpb.RegisterHealthServer(gs, health.NewServer())
		lis := n.listen(t, "10.0.0.1:9600")
		go gs.Serve(lis)
		t.Cleanup(gs.Stop)
		var (
			mu      sync.Mutex
			lenders = map[*transfer.Lender]bool{}
		)
		record := grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
			streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			return lendingStream{ClientStream: cs, seen: func(l *transfer.Lender) {
				mu.Lock()
				lenders[l] = true
				mu.Unlock()
			}}, err
		})
		c, err := New(Config{Conn: ConnConfig{Seeds: []string{lis.Addr().String()},
			DialOptions: []grpc.DialOption{n.dialOption(), record}}, Namespace: "ns",
			Schema: Schema{Model: "m", TokensPerChunk: 16}, DisableRouting: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		within(t, 5*time.Second, "connected", func() bool { return c.State().Status == ConnConnected })
		ids := testIDs(4)
		for round := range 12 {
			srv.stall.Store(round%2 == 1) // odd rounds: the client's deadline ends the put
			chunks := make([]Chunk, len(ids))
			for i := range chunks {
				copy(chunks[i].ID[:], ids[i])
				chunks[i].Data = bytes.Repeat([]byte{byte(round)}, 3<<20)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			_, err := c.Put(ctx, chunks)
			cancel()
			if err == nil {
				t.Fatal("a put the node failed reported success")
			}
			mu.Lock()
			if len(lenders) == 0 && !srv.stall.Load() {
				t.Fatal("Put lent no frame to gRPC; the test proves nothing")
			}
			held := map[*transfer.Lender]int64{}
			for l := range lenders {
				held[l] = l.Outstanding()
			}
			mu.Unlock()
			// A frame still lent now must be one gRPC dropped without handing it
			// back (see lentTimeout): it never hands it back later either. One
			// handed back later was still held by gRPC when Put returned. Later
			// is: once every goroutine has run, and the clock has gone past
			// lentTimeout and the deadline of any put.
			advance(2 * lentTimeout)
			mu.Lock()
			for l, n := range held {
				if now := l.Outstanding(); now < n {
					t.Fatalf("round %d: Put returned while gRPC still held %d frames of its chunk bytes (it let go of %d later)", round, n, n-now)
				}
			}
			clear(lenders)
			mu.Unlock()
			for i := range chunks {
				clear(chunks[i].Data)
			}
			within(t, 5*time.Second, "reconnected", func() bool { return c.State().Status == ConnConnected })
		}
	})
}

// lendingStream reports the Lender of every borrowed frame sent on it.
type lendingStream struct {
	grpc.ClientStream
	seen func(*transfer.Lender)
}

func (s lendingStream) SendMsg(m any) error {
	if f, ok := m.(*transfer.OutFrame); ok && f.Borrow {
		s.seen(f.Lender)
	}
	return s.ClientStream.SendMsg(m)
}

// TestGetRefusesADeclaredSizeAboveTheClustersLargestChunk: a node that
// declares a chunk larger than the largest chunk the cluster announced at
// registration fails the call before the client allocates anything for it.
func TestGetRefusesADeclaredSizeAboveTheClustersLargestChunk(t *testing.T) {
	t.Parallel()
	ids := testIDs(1)
	var id ChunkID
	copy(id[:], ids[0])
	srv := &scriptedCache{chunks: map[ChunkID][]byte{id: []byte("tiny")}, frames: []int{1 << 20},
		declare: map[ChunkID]uint64{id: 1 << 40}, limits: &kvringv1.Limits{MaxChunkBytes: 8 << 20}}
	c := fakeNodeClient(t, srv, nil)
	_, err := c.Get(context.Background(), []ChunkID{id})
	if err == nil || !strings.Contains(err.Error(), "above the cluster's largest chunk 8388608") {
		t.Fatalf("get of a chunk declared 1 TiB: %v", err)
	}
}

// fakeNodeClient serves srv (with a SERVING health service) on 127.0.0.1
// and returns a client of namespace "ns" connected to it, routing off;
// change, if set, adjusts the client's config first.
func fakeNodeClient(t *testing.T, srv kvringv1.CacheServer, change func(*Config)) *Client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(4 << 20))
	kvringv1.RegisterCacheServer(gs, srv)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	cfg := Config{Conn: ConnConfig{Seeds: []string{lis.Addr().String()}}, Namespace: "ns",
		Schema: Schema{Model: "m", TokensPerChunk: 16}, DisableRouting: true, Logger: slog.New(slog.DiscardHandler)}
	if change != nil {
		change(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	testutil.Eventually(t, "connected", 10*time.Second, func() bool { return c.State().Status == ConnConnected })
	return c
}
