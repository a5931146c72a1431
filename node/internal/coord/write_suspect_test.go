package coord_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/internal/clustertest"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// The owner is cut off the way a partition cuts it: its link holds every
// byte (nothing is refused), so only PeerTimeout (30 s here, a bound of a
// hang) or the engine's deadline would end the wait. Each test's put has a
// deadline well under PeerTimeout: before gossip's suspicion was heeded it
// ended DeadlineExceeded.

// TestAPutToAnOwnerGossipSuspectsIsStoredInItsPlaceAtOnce: an owner gossip
// suspects is not asked; its chunk goes to the next member in ring order
// and the put is stored on two live holders, not degraded.
func TestAPutToAnOwnerGossipSuspectsIsStoredInItsPlaceAtOnce(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{})
	ref := c.Register(t, "suspect/before", 2, 1)
	ch := chunkOwnedBy(t, c, ref.GetName(), 2, 1, 4096, ids(c.Nodes[0], c.Nodes[1]))
	c.Net.Hang(c.Nodes[0].ID, c.Nodes[1].ID)
	t.Cleanup(c.Net.HealAll) // before the nodes stop: a held write would hold their close
	c.SetSuspect(c.Nodes[1].ID, true)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := clustertest.Put(ctx, c.Cache(t, 0), ref, []clustertest.Chunk{ch}, clustertest.PutOptions{})
	if err != nil {
		t.Fatalf("put with a suspected owner behind a hung link: %v", err)
	}
	hs := holders(res[0])
	slices.Sort(hs)
	want := []string{c.Nodes[0].ID, c.Nodes[2].ID}
	slices.Sort(want)
	if res[0].GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED || res[0].GetDegraded() || !slices.Equal(hs, want) {
		t.Fatalf("put with a suspected owner: %+v, want stored on nodes 0 and 2, not degraded", res[0])
	}
	if !holds(c.Nodes[2], ref, ch.ID) {
		t.Fatal("the substitute named holder does not hold the chunk")
	}
	if !c.Nodes[0].Coord.IsDown(c.Nodes[1].ID) {
		t.Fatal("the suspected owner is not counted down (reads would not look at its substitute)")
	}
}

// TestAnOwnerSuspectedWhileItsVotesAreAwaitedIsGivenUp: gossip suspects an
// owner while the write waits for its votes; the write gives it up at once
// and reports the chunk held by the owner that answered (stored,
// degraded), never by the suspected one, which frees what it staged.
func TestAnOwnerSuspectedWhileItsVotesAreAwaitedIsGivenUp(t *testing.T) {
	t.Parallel()
	var hv *heldVotes
	c := clustertest.StartCore(t, clustertest.CoreConfig{
		Wrap: func(i int, p kvringv1.PeerServer) kvringv1.PeerServer {
			if i != 1 {
				return p
			}
			hv = newHeldVotes(p, nil) // never released
			return hv
		}})
	ref := c.Register(t, "suspect/during", 2, 1)
	ch := chunkOwnedBy(t, c, ref.GetName(), 2, 1, 4096, ids(c.Nodes[0], c.Nodes[1]))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type outcome struct {
		res []*kvringv1.PutChunkResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := clustertest.Put(ctx, c.Cache(t, 0), ref, []clustertest.Chunk{ch}, clustertest.PutOptions{})
		done <- outcome{res, err}
	}()
	<-hv.held
	c.SetSuspect(c.Nodes[1].ID, true)
	o := <-done
	if o.err != nil {
		t.Fatalf("put whose owner is suspected during the vote: %v", o.err)
	}
	if r := o.res[0]; r.GetStatus() != kvringv1.PutStatus_PUT_STATUS_STORED || !r.GetDegraded() ||
		!slices.Equal(holders(r), []string{c.Nodes[0].ID}) {
		t.Fatalf("put whose owner is suspected during the vote: %+v, want stored on node 0 alone, degraded", r)
	}
	testutil.Eventually(t, "the suspected owner to free what it staged", 30*time.Second, func() bool {
		return !staging(c.Nodes[1], ref, ch.ID)
	})
	if holds(c.Nodes[1], ref, ch.ID) {
		t.Fatal("the suspected owner holds a chunk reported not held by it")
	}
}
