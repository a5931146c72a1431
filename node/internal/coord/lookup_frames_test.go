package coord_test

import (
	"context"
	"testing"

	"golang.org/x/net/http2"

	"github.com/kvring/kvring/node/internal/clustertest"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// TestALookupOfAChunkAnotherNodeHoldsIsOneCallAndNothingElse: a pinned
// lookup (as the Redis port's EXISTS asks) of a chunk one other node holds
// is one Has call to that node, and the connection carries nothing besides
// the call: no window update and no ping per call (gRPC's dynamic window
// sizing sends both for every call that carries data, and each costs both
// nodes a wake-up and a write on the lookup's path).
func TestALookupOfAChunkAnotherNodeHoldsIsOneCallAndNothingElse(t *testing.T) {
	t.Parallel()
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: 3, ReplicationFactor: 1})
	ref := c.Register(t, "frames/ns", 1, 1)
	ch := chunkOwnedBy(t, c, ref.GetName(), 1, 1, 4096, ids(c.Nodes[1]))
	put(t, c, 1, ref, ch)
	co := c.Nodes[0].Coord
	lookup := func() {
		res, unanswered, err := co.LookupChecked(context.Background(), &kvringv1.LookupRequest{Namespace: ref, Ids: [][]byte{ch.ID}, PinTtlMs: 2000})
		if err != nil || unanswered != nil || res.GetHeld() != 1 {
			t.Fatalf("lookup: held %d, unanswered %v, err %v; want the chunk held", res.GetHeld(), unanswered, err)
		}
	}
	lookup() // the connection is made, its settings exchanged
	c.Net.ResetFrames()
	const n = 50
	for range n {
		lookup()
	}
	f := c.Net.Frames()
	if got := f.Sent[http2.FrameHeaders]; got != n {
		t.Errorf("%d lookups sent %d calls (HEADERS frames), want one each", n, got)
	}
	for _, ft := range []http2.FrameType{http2.FrameWindowUpdate, http2.FramePing} {
		// A keepalive ping every 10 s is no ping per call.
		if f.Sent[ft] > 1 || f.Received[ft] > 1 {
			t.Errorf("%d lookups: %d %v frames sent, %d received; want none per call", n, f.Sent[ft], ft, f.Received[ft])
		}
	}
}
