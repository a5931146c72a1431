package coord_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/internal/clustertest"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// TestAnEngineGoneDuringTheVoteLeavesNoStageBehind: an engine that
// cancels its put while an owner's votes are on their way does not cut the
// owner's prepare: the owner had staged the chunk under a token only this
// write knows, so the write runs to its commit and the owner holds the
// chunk, with nothing left staged. (Before, the cancel cut the stream, the
// votes were lost with their tokens, and the chunk stayed staged until its
// lease, making the next put of it wait for a writer that was gone.)
func TestAnEngineGoneDuringTheVoteLeavesNoStageBehind(t *testing.T) {
	t.Parallel()
	release, putGone := make(chan struct{}), make(chan struct{})
	var hv *heldVotes
	c := clustertest.StartCore(t, clustertest.CoreConfig{Wrap: func(i int, p kvringv1.PeerServer) kvringv1.PeerServer {
		if i != 1 {
			return p
		}
		hv = newHeldVotes(p, release)
		return hv
	}, Intercept: func(i int) grpc.StreamServerInterceptor {
		if i != 0 {
			return nil
		}
		return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if info.FullMethod == kvringv1.Cache_Put_FullMethodName {
				context.AfterFunc(ss.Context(), func() { close(putGone) })
			}
			return handler(srv, ss)
		}
	}})
	ref := c.Register(t, "vote/gone", 2, 1)
	ch := chunkOwnedBy(t, c, ref.GetName(), 2, 1, 4096, ids(c.Nodes[0], c.Nodes[1]))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := clustertest.Put(ctx, c.Cache(t, 0), ref, []clustertest.Chunk{ch}, clustertest.PutOptions{})
		done <- err
	}()
	<-hv.held // node 1 staged the chunk under a token and voted; its votes are on their way
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled put succeeded")
	}
	<-putGone // node 0 saw the engine go
	close(release)
	testutil.Eventually(t, "node 1 to hold the chunk", 30*time.Second, func() bool { return holds(c.Nodes[1], ref, ch.ID) })
	if staging(c.Nodes[1], ref, ch.ID) {
		t.Fatal("node 1 still has the chunk staged")
	}
	res := put(t, c, 2, ref, ch)
	if res[0].GetStatus() != kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD || !slices.Equal(holders(res[0]), sorted(c.Nodes[0], c.Nodes[1])) {
		t.Fatalf("the put after: %+v", res[0])
	}
}

// TestAnOwnerWhoseVotesAreLateFreesWhatItStaged is the flake of
// TestRoutingSkipsAnOwnerThatHangs made deterministic: an owner whose
// votes do not reach the coordinator within PeerTimeout (held here; a
// loaded machine or a hanging link there) fails its share, and the chunk it
// staged is freed at once, not left staged for no coordinator. A later put
// of the chunk is then stored there without waiting for "another writer".
func TestAnOwnerWhoseVotesAreLateFreesWhatItStaged(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var hv *heldVotes
	c := clustertest.StartCore(t, clustertest.CoreConfig{PeerTimeout: time.Second, CommitTimeout: 20 * time.Second,
		Wrap: func(i int, p kvringv1.PeerServer) kvringv1.PeerServer {
			if i != 1 {
				return p
			}
			hv = newHeldVotes(p, release)
			return hv
		}})
	ref := c.Register(t, "vote/late", 2, 1)
	ch := chunkOwnedBy(t, c, ref.GetName(), 2, 1, 4096, ids(c.Nodes[0], c.Nodes[1]))

	res := put(t, c, 0, ref, ch)
	if res[0].GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED || !res[0].GetDegraded() || slices.Contains(holders(res[0]), c.Nodes[1].ID) {
		t.Fatalf("a put whose second owner votes late: %+v, want stored, degraded, not held by node 1", res[0])
	}
	testutil.Eventually(t, "node 1 to free the staged chunk", 30*time.Second, func() bool { return !staging(c.Nodes[1], ref, ch.ID) })
	if holds(c.Nodes[1], ref, ch.ID) {
		t.Fatal("node 1 holds a chunk whose votes never arrived")
	}
	close(release)
	start := time.Now()
	res = put(t, c, 2, ref, ch)
	if res[0].GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED || !slices.Equal(holders(res[0]), sorted(c.Nodes[0], c.Nodes[1])) {
		t.Fatalf("the put after: %+v, want stored on nodes 0 and 1", res[0])
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the put after waited %s: for a stage nobody was writing", waited)
	}
}

// TestAHungOwnerIsSkippedWithinPeerTimeout: with the link to an owner
// hanging (the owner accepts connections and never answers), a put is
// stored on the others within the peer timeout, degraded, and never names
// the hung owner; the coordinator counts it down until it answers again.
func TestAHungOwnerIsSkippedWithinPeerTimeout(t *testing.T) {
	t.Parallel()
	// PeerTimeout bounds the wait for the hung owner; the healthy ones
	// answer well within it even on a loaded machine.
	c := clustertest.StartCore(t, clustertest.CoreConfig{PeerTimeout: 2 * time.Second})
	ref := c.Register(t, "hung/owner", 2, 1)
	ch := chunkOwnedBy(t, c, ref.GetName(), 2, 1, 4096, ids(c.Nodes[0], c.Nodes[1]))
	c.Net.Hang(c.Nodes[0].ID, c.Nodes[1].ID)

	res := put(t, c, 0, ref, ch)
	if !isHeld(res[0]) || slices.Contains(holders(res[0]), c.Nodes[1].ID) {
		t.Fatalf("put with a hung owner: %+v", res[0])
	}
	if !c.Nodes[0].Coord.IsDown(c.Nodes[1].ID) || c.Nodes[0].Coord.Unreachable() < 1 {
		t.Fatalf("node 0 does not count node 1 down (down %v, unreachable %d)", c.Nodes[0].Coord.IsDown(c.Nodes[1].ID), c.Nodes[0].Coord.Unreachable())
	}
	if staging(c.Nodes[1], ref, ch.ID) || holds(c.Nodes[1], ref, ch.ID) {
		t.Fatal("the hung owner staged or holds the chunk")
	}
	c.Net.HealAll()
	got, err := clustertest.Get(context.Background(), c.Cache(t, 0), ref, [][]byte{ch.ID}, nil)
	if err != nil || got[0].Header.GetStatus() != kvringv1.ReadStatus_READ_STATUS_FOUND || string(got[0].Data) != string(ch.Data) {
		t.Fatalf("get after the heal: %v %+v", err, got)
	}
}

// TestAWriteToACutOwnerIsStoredInItsPlace: with R=1 and the chunk's owner
// cut off from the coordinator, the chunk is stored on the next member in
// its ring order (never reported stored on the cut owner), and lookups and
// gets through that coordinator find it there meanwhile.
func TestAWriteToACutOwnerIsStoredInItsPlace(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{PeerTimeout: 5 * time.Second})
	ref := c.Register(t, "cut/owner", 1, 1)
	ch := chunkOwnedBy(t, c, ref.GetName(), 1, 1, 8192, ids(c.Nodes[1]))
	c.Net.Cut(c.Nodes[0].ID, c.Nodes[1].ID)

	res := put(t, c, 0, ref, ch)
	if res[0].GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED || len(res[0].GetHolders()) != 1 || res[0].GetHolders()[0].GetNodeId() == c.Nodes[1].ID {
		t.Fatalf("put to a cut owner: %+v", res[0])
	}
	holder := c.NodeOf(res[0].GetHolders()[0].GetNodeId())
	if holder == nil || !holds(holder, ref, ch.ID) || holds(c.Nodes[1], ref, ch.ID) {
		t.Fatalf("the named holder %v does not hold the chunk", res[0].GetHolders())
	}
	lk, err := c.Cache(t, 0).Lookup(context.Background(), &kvringv1.LookupRequest{Namespace: ref, Ids: [][]byte{ch.ID}})
	if err != nil || lk.GetHeld() != 1 {
		t.Fatalf("lookup through node 0: %v %v", lk, err)
	}
	got, err := clustertest.Get(context.Background(), c.Cache(t, 0), ref, [][]byte{ch.ID}, nil)
	if err != nil || string(got[0].Data) != string(ch.Data) {
		t.Fatalf("get through node 0: %v %+v", err, got)
	}
}

// TestGetSaysUnavailableWhenNoOwnerAnswers: a read whose owners are all
// cut off is an explicit UNAVAILABLE, naming each owner; one that finds
// the chunk nowhere is NOT_FOUND.
func TestGetSaysUnavailableWhenNoOwnerAnswers(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{PeerTimeout: 5 * time.Second})
	ref := c.Register(t, "get/unavailable", 2, 1)
	ch := chunkOwnedBy(t, c, ref.GetName(), 2, 1, 4096, ids(c.Nodes[1], c.Nodes[2]))
	put(t, c, 1, ref, ch)
	missing := clustertest.ChunkOf(99, 10)
	got, err := clustertest.Get(context.Background(), c.Cache(t, 0), ref, [][]byte{ch.ID, missing.ID}, nil)
	if err != nil || string(got[0].Data) != string(ch.Data) || got[1].Header.GetStatus() != kvringv1.ReadStatus_READ_STATUS_NOT_FOUND {
		t.Fatalf("get: %v %+v", err, got)
	}
	c.Net.Partition([]string{c.Nodes[0].ID}, []string{c.Nodes[1].ID, c.Nodes[2].ID})
	got, err = clustertest.Get(context.Background(), c.Cache(t, 0), ref, [][]byte{ch.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := got[0].Header
	if h.GetStatus() != kvringv1.ReadStatus_READ_STATUS_UNAVAILABLE || len(got[0].Data) != 0 {
		t.Fatalf("get with every owner cut off: %+v", h)
	}
	for _, n := range c.Nodes[1:] {
		if !contains(h.GetReason(), n.ID) {
			t.Fatalf("the reason %q does not name owner %s", h.GetReason(), n.ID)
		}
	}
}

func isHeld(r *kvringv1.PutChunkResult) bool {
	return r.GetStatus() == kvringv1.PutStatus_PUT_STATUS_STORED || r.GetStatus() == kvringv1.PutStatus_PUT_STATUS_ALREADY_HELD
}
