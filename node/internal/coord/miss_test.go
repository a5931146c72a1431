package coord_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvring/kvring/node/internal/clustertest"
	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// startOneHolder starts four nodes with a namespace of two replicas and a
// chunk whose owners are nodes 1 and 2, held by node 1 only (node 2 lost
// its copy), then cuts node 0 off from node 1.
func startOneHolder(t *testing.T) (*clustertest.Core, *kvringv1.NamespaceRef, clustertest.Chunk) {
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: 4, ReplicationFactor: 2, PeerTimeout: time.Second})
	ref := c.Register(t, "miss/one-holder", 2, 1)
	ch := chunkOwnedBy(t, c, ref.GetName(), 2, 1, 4096, ids(c.Nodes[1], c.Nodes[2]))
	put(t, c, 1, ref, ch)
	for _, n := range c.Nodes[2:3] {
		if err := n.Store.Evict(namespace.StoreName(ref.GetName(), ref.GetFingerprint()), storeID(t, ch.ID)); err != nil {
			t.Fatal(err)
		}
	}
	c.Net.Partition([]string{c.Nodes[0].ID}, []string{c.Nodes[1].ID})
	return c, ref, ch
}

// TestAGetIsNotFoundOnlyWhenEveryOwnerAnswered: a chunk one owner says it
// does not hold while the other did not answer is UNAVAILABLE, naming that
// owner (it may hold it: the Redis port answers an error, never nil); a
// chunk every owner says it does not hold is NOT_FOUND.
func TestAGetIsNotFoundOnlyWhenEveryOwnerAnswered(t *testing.T) {
	t.Parallel()
	c, ref, ch := startOneHolder(t)
	missing := chunkOwnedBy(t, c, ref.GetName(), 2, 500, 64, ids(c.Nodes[2], c.Nodes[3]))
	got, err := clustertest.Get(context.Background(), c.Cache(t, 0), ref, [][]byte{ch.ID, missing.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h := got[0].Header; h.GetStatus() != kvringv1.ReadStatus_READ_STATUS_UNAVAILABLE || !contains(h.GetReason(), c.Nodes[1].ID) {
		t.Errorf("a chunk whose other owner did not answer: %v %q, want UNAVAILABLE naming %s", h.GetStatus(), h.GetReason(), c.Nodes[1].ID)
	}
	if s := got[1].Header.GetStatus(); s != kvringv1.ReadStatus_READ_STATUS_NOT_FOUND {
		t.Errorf("a chunk both owners said they do not hold: %v, want NOT_FOUND", s)
	}
}

// TestLookupCheckedTellsNotHeldFromCouldNotAsk: LookupChecked's unanswered
// names the owner that did not answer about a chunk it may hold, and is nil
// for a chunk every owner answered about.
func TestLookupCheckedTellsNotHeldFromCouldNotAsk(t *testing.T) {
	t.Parallel()
	c, ref, ch := startOneHolder(t)
	co := c.Nodes[0].Coord
	res, unanswered, err := co.LookupChecked(context.Background(), &kvringv1.LookupRequest{Namespace: ref, Ids: [][]byte{ch.ID}})
	if err != nil || res.GetHeld() != 0 || !errors.Is(unanswered, transfer.ErrUnavailable) || !contains(unanswered.Error(), c.Nodes[1].ID) {
		t.Fatalf("lookup of a chunk an unanswering owner holds = %v, %v, %v; want 0 held and unavailable naming %s", res, unanswered, err, c.Nodes[1].ID)
	}
	missing := chunkOwnedBy(t, c, ref.GetName(), 2, 500, 64, ids(c.Nodes[2], c.Nodes[3]))
	res, unanswered, err = co.LookupChecked(context.Background(), &kvringv1.LookupRequest{Namespace: ref, Ids: [][]byte{missing.ID}})
	if err != nil || res.GetHeld() != 0 || unanswered != nil {
		t.Fatalf("lookup of a chunk no owner holds = %v, %v, %v; want 0 held and nothing unanswered", res, unanswered, err)
	}
}
