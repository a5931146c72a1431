package coord_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvring/kvring/node/internal/clustertest"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// hangingPeers makes the Peer services it wraps hang on Has (until the
// caller gives up) once hang is set for them, and counts those calls (and,
// in asked, every Has call).
type hangingPeers struct {
	mu    sync.Mutex
	hang  map[int]bool
	calls map[int]*atomic.Int64
	asked map[int]*atomic.Int64
}

func (h *hangingPeers) wrap(i int, peer kvringv1.PeerServer) kvringv1.PeerServer {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[i] = &atomic.Int64{}
	h.asked[i] = &atomic.Int64{}
	return &hangingPeer{PeerServer: peer, h: h, i: i}
}

func (h *hangingPeers) set(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hang[i] = true
}

type hangingPeer struct {
	kvringv1.PeerServer
	h *hangingPeers
	i int
}

func (p *hangingPeer) Has(ctx context.Context, req *kvringv1.HasRequest) (*kvringv1.HasResponse, error) {
	p.h.mu.Lock()
	hang := p.h.hang[p.i]
	p.h.mu.Unlock()
	p.h.asked[p.i].Add(1)
	if !hang {
		return p.PeerServer.Has(ctx, req)
	}
	p.h.calls[p.i].Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func startHanging(t *testing.T, peerTimeout time.Duration) (*clustertest.Core, *hangingPeers, *kvringv1.NamespaceRef, []clustertest.Chunk) {
	h := &hangingPeers{hang: map[int]bool{}, calls: map[int]*atomic.Int64{}, asked: map[int]*atomic.Int64{}}
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: 4, ReplicationFactor: 2, Wrap: h.wrap, PeerTimeout: peerTimeout})
	ref := c.Register(t, "down/ns", 2, 1)
	var chunks []clustertest.Chunk
	for n := range uint64(200) {
		chunks = append(chunks, clustertest.ChunkOf(12000+n, 256))
	}
	put(t, c, 0, ref, chunks...)
	return c, h, ref, chunks
}

// TestAnOwnerThatDoesNotAnswerIsAskedOnceALookup: with replication 2, one
// owner hangs; a lookup of 200 chunks (several waves) asks it once, not in
// every wave, and counts every chunk, since each has another owner: a member
// that is down costs a lookup one peer timeout, not one per round.
func TestAnOwnerThatDoesNotAnswerIsAskedOnceALookup(t *testing.T) {
	t.Parallel()
	c, h, ref, chunks := startHanging(t, 2*time.Second) // long enough for the owners that answer on a loaded machine
	// Which peers a lookup asks depends on the placement (node ids are
	// random): hang one that a lookup with every peer answering asks.
	req := &kvringv1.LookupRequest{Namespace: ref, Ids: clustertest.IDs(chunks)}
	if _, err := c.Cache(t, 0).Lookup(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	hung := 0
	for i := 1; i < 4 && hung == 0; i++ {
		if h.asked[i].Load() > 0 {
			hung = i
		}
	}
	if hung == 0 {
		t.Fatal("a lookup of 200 chunks asked no peer; the test needs one it asks")
	}
	h.set(hung)
	resp, err := c.Cache(t, 0).Lookup(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetHeld() != uint32(len(chunks)) {
		t.Fatalf("held %d of %d, each chunk has an owner that answers", resp.GetHeld(), len(chunks))
	}
	if n := h.calls[hung].Load(); n != 1 {
		t.Fatalf("the owner that hangs was asked %d times in one lookup, want once", n)
	}
}

// TestALookupAnswersBeforeItsCallerGivesUp: every other node hangs and the
// peer timeout is longer than the caller waits; the lookup still answers
// (with what this node holds) before the caller's deadline, instead of the
// caller getting nothing but a deadline error.
func TestALookupAnswersBeforeItsCallerGivesUp(t *testing.T) {
	t.Parallel()
	c, h, ref, chunks := startHanging(t, time.Minute)
	for i := 1; i < 4; i++ {
		h.set(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := c.Cache(t, 0).Lookup(ctx, &kvringv1.LookupRequest{Namespace: ref, Ids: clustertest.IDs(chunks)})
	if err != nil {
		t.Fatalf("lookup: %v, want an answer before the deadline", err)
	}
	if resp.GetHeld() > uint32(len(chunks)) {
		t.Fatalf("held %d of %d", resp.GetHeld(), len(chunks))
	}
}
