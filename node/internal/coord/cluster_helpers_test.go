package coord_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/node/internal/clustertest"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// chunkOwnedBy returns a chunk of size bytes whose r owners on the
// cluster's ring satisfy ok, searching from seed.
func chunkOwnedBy(t *testing.T, c *clustertest.Core, ns string, r int, seed uint64, size int, ok func(owners []ring.Member) bool) clustertest.Chunk {
	t.Helper()
	rg := c.Ring()
	for n := seed; n < seed+100_000; n++ {
		ch := clustertest.ChunkOf(n, size)
		if ok(rg.Owners(ns, ch.ID, r)) {
			return ch
		}
	}
	t.Fatal("no chunk with the owners wanted")
	return clustertest.Chunk{}
}

// ids is a predicate: the owners are exactly these nodes, in this order.
func ids(nodes ...*clustertest.Node) func([]ring.Member) bool {
	return func(owners []ring.Member) bool {
		if len(owners) != len(nodes) {
			return false
		}
		for i, n := range nodes {
			if owners[i].ID != n.ID {
				return false
			}
		}
		return true
	}
}

// holders are the node ids a result names as holders.
func holders(r *kvringv1.PutChunkResult) []string {
	var out []string
	for _, h := range r.GetHolders() {
		out = append(out, h.GetNodeId())
	}
	slices.Sort(out)
	return out
}

// sorted returns the ids of nodes, sorted.
func sorted(nodes ...*clustertest.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.ID)
	}
	slices.Sort(out)
	return out
}

// holds reports whether node n holds the chunk sealed.
func holds(n *clustertest.Node, ref *kvringv1.NamespaceRef, id []byte) bool {
	held, _, err := n.Owner.Has("", ref, [][]byte{id}, nil)
	return err == nil && held[0]
}

// staging reports whether node n has a write of the chunk staged.
func staging(n *clustertest.Node, ref *kvringv1.NamespaceRef, id []byte) bool {
	return n.Owner.Staging(ref, [][]byte{id}, []bool{false})[0]
}

// storeID is a chunk id as the store names it.
func storeID(t *testing.T, id []byte) store.ID {
	t.Helper()
	sid, err := store.ParseID(id)
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

// heldVotes wraps an owner's Peer service so that its prepares' votes are
// held, once EndPrepare has registered them, until release is closed or the
// stream ends: an owner whose answer is late or lost on the way.
type heldVotes struct {
	kvringv1.PeerServer
	held    chan struct{} // closed when the first votes are held
	once    sync.Once
	release chan struct{} // nil: never released
}

func newHeldVotes(peer kvringv1.PeerServer, release chan struct{}) *heldVotes {
	return &heldVotes{PeerServer: peer, held: make(chan struct{}), release: release}
}

func (h *heldVotes) Prepare(stream grpc.BidiStreamingServer[kvringv1.PrepareRequest, kvringv1.PrepareResponse]) error {
	return h.PeerServer.Prepare(&holdingStream{BidiStreamingServer: stream, h: h})
}

type holdingStream struct {
	grpc.BidiStreamingServer[kvringv1.PrepareRequest, kvringv1.PrepareResponse]
	h *heldVotes
}

func (s *holdingStream) Send(m *kvringv1.PrepareResponse) error {
	if m.GetVotes() != nil {
		s.h.once.Do(func() { close(s.h.held) })
		select {
		case <-s.h.release:
		case <-s.Context().Done():
			return s.Context().Err()
		}
	}
	return s.BidiStreamingServer.Send(m)
}

// put writes chunks through node i's Cache service.
func put(t *testing.T, c *clustertest.Core, i int, ref *kvringv1.NamespaceRef, chunks ...clustertest.Chunk) []*kvringv1.PutChunkResult {
	t.Helper()
	res, err := clustertest.Put(context.Background(), c.Cache(t, i), ref, chunks, clustertest.PutOptions{})
	if err != nil {
		t.Fatalf("put through node %d: %v", i, err)
	}
	return res
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
