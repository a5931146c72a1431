package client

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/internal/connpool"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// Unit tests of the routing layer. Tests against real nodes are in node/route_test.go (this package cannot
// import node).

func testRing(t *testing.T, ids ...string) *ring.Ring {
	t.Helper()
	members := make([]ring.Member, len(ids))
	for i, id := range ids {
		members[i] = ring.Member{ID: id, Addr: fmt.Sprintf("127.0.0.1:%d", 19000+i)}
	}
	r, err := ring.New(members, 7, ring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// idleConn is a ClientConn that never connects (grpc.NewClient does no I/O).
func idleConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func testIDs(n int) [][]byte {
	ids := make([][]byte, n)
	for i := range ids {
		h := sha256.Sum256(binary.LittleEndian.AppendUint64(nil, uint64(i)))
		ids[i] = h[:]
	}
	return ids
}

// TestSplitGroupsEachIDUnderItsPrimaryOwner: every position lands in exactly one share, ascending, under its
// primary owner; the connected node's ids form the main share; without a view, or when the connected node owns
// everything, there is nothing to split.
func TestSplitGroupsEachIDUnderItsPrimaryOwner(t *testing.T) {
	rg := testRing(t, "a", "b", "c")
	main := idleConn(t, "127.0.0.1:19000")
	r := &router{}
	ids := testIDs(60)
	id := func(i int) []byte { return ids[i] }
	if r.split(main, "ns", len(ids), id, false) != nil {
		t.Fatal("split without a view")
	}
	var none *router
	if none.split(main, "ns", len(ids), id, false) != nil {
		t.Fatal("split with routing disabled")
	}
	r.view.Store(&topology{ring: rg, self: "a", via: main})
	shares := r.split(main, "ns", len(ids), id, false)
	seen := make([]int, len(ids))
	for _, s := range shares {
		if !slices.IsSorted(s.idx) || len(s.idx) == 0 {
			t.Fatalf("share %+v: positions not ascending", s)
		}
		for _, i := range s.idx {
			seen[i]++
			p, _ := rg.Primary("ns", ids[i])
			if s.main != (p.ID == "a") || (!s.main && s.owner != p) {
				t.Fatalf("id %d (primary %s) in share %+v", i, p.ID, s)
			}
		}
	}
	if len(shares) != 3 || slices.ContainsFunc(seen, func(n int) bool { return n != 1 }) {
		t.Fatalf("%d shares, positions seen %v: want 3 shares covering each position once", len(shares), seen)
	}

	// Another connection than the view's: no main share, the connected node is just another owner.
	other := idleConn(t, "127.0.0.1:19001")
	for _, s := range r.split(other, "ns", len(ids), id, false) {
		if s.main {
			t.Fatal("a main share although the view came over another connection")
		}
	}

	// Only ids of the connected node: the whole batch goes over the main connection.
	var own [][]byte
	for _, b := range ids {
		if p, _ := rg.Primary("ns", b); p.ID == "a" {
			own = append(own, b)
		}
	}
	if s := r.split(main, "ns", len(own), func(i int) []byte { return own[i] }, false); s != nil {
		t.Fatalf("split of the connected node's own ids: %+v", s)
	}
}

// TestPickRestoresTheCallersOrder: results picked per share and written back by position give the batch order.
func TestPickRestoresTheCallersOrder(t *testing.T) {
	batch := []int{10, 11, 12, 13, 14, 15}
	shares := [][]int{{1, 4}, {0, 2, 5}, {3}}
	out := make([]int, len(batch))
	for _, idx := range shares {
		for k, v := range pick(batch, idx) {
			out[idx[k]] = v
		}
	}
	if !slices.Equal(out, batch) {
		t.Fatalf("merged %v, want %v", out, batch)
	}
}

// TestOwnerFailedOnlyForTheWayToTheOwner: unreachable, silent, unknown-namespace and unimplemented owners fall
// back; bad input, schema mismatches and the caller's own deadline do not.
func TestOwnerFailedOnlyForTheWayToTheOwner(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(live)
	cancel()
	remote := func(err error) error {
		return transfer.FromStatus(transfer.ToStatus(fmt.Errorf("boom: %w", err)))
	}
	for _, tt := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"unavailable", live, transfer.FromStatus(status.Error(codes.Unavailable, "connection refused")), true},
		{"silent owner", live, transfer.FromStatus(status.Error(codes.Unavailable, errNoAnswer.Error())), true},
		{"deadline not ours", live, transfer.FromStatus(status.Error(codes.DeadlineExceeded, "slow")), true},
		{"connection closed under the call", live, transfer.FromStatus(status.Error(codes.Canceled, "closing")), true},
		{"namespace unknown there", live, remote(transfer.ErrUnknownNamespace), true},
		{"unimplemented", live, transfer.FromStatus(status.Error(codes.Unimplemented, "unknown method")), true},
		{"pool closed", live, fmt.Errorf("owner x: %w", transfer.ErrUnavailable), true},
		{"bad input", live, remote(transfer.ErrInvalidArgument), false},
		{"schema mismatch", live, remote(transfer.ErrSchemaMismatch), false},
		{"protocol error", live, errors.New("kvring put: the node answered without saying which chunks it needs"), false},
		{"caller gave up", done, transfer.FromStatus(status.Error(codes.Canceled, "canceled")), false},
	} {
		if got := ownerFailed(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: ownerFailed(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// TestObservePromptsOnlyWhenANodesOwnEpochChanges: epochs are local to each node, so a node's first epoch is
// only recorded, and only a change of the same node's epoch asks for a new view.
func TestObservePromptsOnlyWhenANodesOwnEpochChanges(t *testing.T) {
	r := &router{kick: make(chan struct{}, 1), epochs: map[string]uint64{"main:1": 4}}
	prompted := func() bool {
		select {
		case <-r.kick:
			return true
		default:
			return false
		}
	}
	for _, step := range []struct {
		addr  string
		epoch uint64
		want  bool
	}{
		{"main:1", 4, false}, // the view's own epoch
		{"b:1", 9, false},    // first reply of b
		{"b:1", 9, false},
		{"c:1", 2, false},
		{"b:1", 10, true}, // b's ring changed
		{"main:1", 5, true},
		{"c:1", 0, false}, // no epoch: ignored
	} {
		r.observe(step.addr, step.epoch)
		if got := prompted(); got != step.want {
			t.Fatalf("observe(%s, %d): prompted %v, want %v", step.addr, step.epoch, got, step.want)
		}
	}
	var none *router
	none.observe("x", 1) // routing disabled: no-op
}

// TestBuildRebuildsTheNodesPlacement: a Topology answer gives a ring that places every key as the node's does;
// an answer whose fingerprint this client's placement does not reproduce is refused, and so is no member.
func TestBuildRebuildsTheNodesPlacement(t *testing.T) {
	rg := testRing(t, "n1", "n2", "n3")
	cfg := rg.Config()
	resp := &kvringv1.TopologyResponse{Epoch: rg.Epoch(), Self: &kvringv1.NodeRef{NodeId: "n2"},
		Ring: &kvringv1.RingSettings{PartitionCount: uint32(cfg.PartitionCount), ReplicationFactor: uint32(cfg.ReplicationFactor),
			Load: cfg.Load, VirtualNodes: uint32(cfg.VirtualNodes), Hasher: cfg.Hasher, Fingerprint: cfg.Fingerprint()}}
	for _, m := range slices.Backward(rg.Members()) { // any order
		resp.Members = append(resp.Members, &kvringv1.NodeRef{NodeId: m.ID, GrpcAddr: m.Addr})
	}
	cc := idleConn(t, "127.0.0.1:19001")
	r := &router{}
	top, why := r.build(resp, cc)
	if why != "" || top.ring == nil || top.self != "n2" || top.ring.Epoch() != rg.Epoch() {
		t.Fatalf("build: %+v %q", top, why)
	}
	for _, id := range testIDs(200) {
		a, _ := rg.Primary("ns", id)
		b, _ := top.ring.Primary("ns", id)
		if a != b {
			t.Fatalf("id %x: node places it on %s, the client on %s", id, a.ID, b.ID)
		}
	}
	// The same view again reuses the ring.
	r.view.Store(top)
	if again, _ := r.build(resp, cc); again.ring != top.ring {
		t.Fatal("an unchanged view rebuilt the ring")
	}

	resp.Ring.Fingerprint = "0000000000000000"
	if top, why := r.build(resp, cc); why == "" || top.ring != nil {
		t.Fatalf("a view with another placement fingerprint was accepted: %+v", top)
	}
	resp.Members = nil
	if top, why := r.build(resp, cc); why != "" || top.ring != nil {
		t.Fatalf("a view without members: %+v %q", top, why)
	}
}

// silentCache hangs on Get for ids starting with 0; for the others it answers at once, then takes slow before
// ending the stream.
type silentCache struct {
	kvringv1.UnimplementedCacheServer
	slow time.Duration
}

func (c silentCache) Get(req *kvringv1.GetRequest, s grpc.ServerStreamingServer[kvringv1.GetResponse]) error {
	if id := req.GetIds()[0]; id[0] == 0 {
		<-s.Context().Done()
		return s.Context().Err()
	}
	err := s.Send(&kvringv1.GetResponse{Epoch: 3, Msg: &kvringv1.GetResponse_Header{Header: &kvringv1.ChunkHeader{
		Status: kvringv1.ReadStatus_READ_STATUS_NOT_FOUND}}})
	if err != nil {
		return err
	}
	select { // a long transfer after the first answer
	case <-time.After(c.slow):
		return nil
	case <-s.Context().Done():
		return s.Context().Err()
	}
}

// TestOwnerStreamsMustAnswerInTime: a stream on an owner connection whose first message does not come within the
// answer timeout fails with Unavailable (so its share falls back); one that answers is left alone however long
// it then runs. In a synctest bubble on memNet, so the times are exact.
func TestOwnerStreamsMustAnswerInTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memNet
		const answer = 200 * time.Millisecond
		gs := grpc.NewServer()
		kvringv1.RegisterCacheServer(gs, silentCache{slow: 2 * answer})
		lis := n.listen(t, "10.0.0.1:9600")
		go gs.Serve(lis)
		t.Cleanup(gs.Stop)
		addr := lis.Addr().String()

		cn, err := newConn(ConnConfig{Seeds: []string{addr}, Logger: slog.New(slog.DiscardHandler),
			DialOptions: []grpc.DialOption{n.dialOption()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cn.close() })
		pool := connpool.New(ownerDialOptions(cn, answer)...)
		t.Cleanup(pool.Close)
		cc, err := pool.Get(addr)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()

		start := time.Now()
		s, err := kvringv1.NewCacheClient(cc).Get(ctx, &kvringv1.GetRequest{Ids: [][]byte{{0}}})
		if err == nil {
			_, err = s.Recv()
		}
		took := time.Since(start)
		if status.Code(err) != codes.Unavailable || !errors.Is(err, transfer.ErrUnavailable) || !errors.Is(err, errNoAnswer) ||
			took < answer || took >= 2*answer {
			t.Fatalf("silent owner: %v (%s) after %v, want Unavailable saying errNoAnswer after %v", err, status.Code(err), took, answer)
		}

		start = time.Now()
		s, err = kvringv1.NewCacheClient(cc).Get(ctx, &kvringv1.GetRequest{Ids: [][]byte{{1}}})
		if err != nil {
			t.Fatal(err)
		}
		if m, err := s.Recv(); err != nil || m.GetEpoch() != 3 {
			t.Fatalf("answering owner: %v %v", m, err)
		}
		if _, err := s.Recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("answering owner, end of stream: %v, want EOF", err)
		}
		if took := time.Since(start); took < 2*answer {
			t.Fatalf("answering owner's stream ended after %s, before it had run its course (%s)", took, 2*answer)
		}
	})
}

// TestAClosedRouterHandsOutNoOwnerConnection: closing the router shuts its owner connections down, and asking for
// one afterwards fails like the main connection after close: Canceled, wrapping errConnClosed.
func TestAClosedRouterHandsOutNoOwnerConnection(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memNet
		cn, err := newConn(ConnConfig{Seeds: []string{"10.0.0.1:9600"}, Logger: slog.New(slog.DiscardHandler),
			DialOptions: []grpc.DialOption{n.dialOption()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cn.close() })
		r := newRouter(cn, slog.New(slog.DiscardHandler))
		t.Cleanup(r.close)
		const owner = "10.0.0.2:9600"
		cc, err := r.ownerConn(owner)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := r.ownerConn(owner); again != cc {
			t.Fatal("a second ownerConn made another connection")
		}
		r.close()
		if s := cc.GetState(); s != connectivity.Shutdown {
			t.Errorf("owner connection is %s after the router closed, want Shutdown", s)
		}
		_, err = r.ownerConn(owner)
		if !errors.Is(err, errConnClosed) || status.Code(err) != codes.Canceled {
			t.Fatalf("ownerConn after close: %v (%s), want the client's closed error (Canceled)", err, status.Code(err))
		}
	})
}

// TestALookupsOwnerAttemptLeavesTimeForTheFallback: the call to a key's
// owner gets half the time left, so that an owner that hangs leaves the
// other half for the call through the connected node.
func TestALookupsOwnerAttemptLeavesTimeForTheFallback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	octx, ocancel := ownerAttempt(ctx)
	defer ocancel()
	dl, _ := ctx.Deadline()
	odl, ok := octx.Deadline()
	if !ok || time.Until(odl) > time.Until(dl)/2+time.Minute || time.Until(odl) < time.Until(dl)/2-time.Minute {
		t.Fatalf("owner attempt ends in %v, the call in %v: want half", time.Until(odl), time.Until(dl))
	}
	if nctx, ncancel := ownerAttempt(context.Background()); true {
		defer ncancel()
		if _, ok := nctx.Deadline(); ok {
			t.Fatal("a call without a deadline got one")
		}
	}
}
