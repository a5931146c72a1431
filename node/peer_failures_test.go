package node

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// flakyPeer passes Peer calls to a real owner, or fails them with
// Unavailable while down is set.
type flakyPeer struct {
	kvringv1.PeerServer
	down *atomic.Bool
}

var errFlaky = status.Error(codes.Unavailable, "flaky peer is down")

func (f flakyPeer) Prepare(s grpc.BidiStreamingServer[kvringv1.PrepareRequest, kvringv1.PrepareResponse]) error {
	if f.down.Load() {
		return errFlaky
	}
	return f.PeerServer.Prepare(s)
}

func (f flakyPeer) Has(ctx context.Context, req *kvringv1.HasRequest) (*kvringv1.HasResponse, error) {
	if f.down.Load() {
		return nil, errFlaky
	}
	return f.PeerServer.Has(ctx, req)
}

func (f flakyPeer) Fetch(req *kvringv1.FetchRequest, s grpc.ServerStreamingServer[kvringv1.FetchResponse]) error {
	if f.down.Load() {
		return errFlaky
	}
	return f.PeerServer.Fetch(req, s)
}

// TestAPeerOutageIsLoggedOnceAcrossRequests: while an owner is down, a
// coordinator's lookups, puts and gets keep working and the outage is one
// WARN line, counted in kvring_peer_failures_total; the first request after
// the owner is back logs one INFO line with the same count.
func TestAPeerOutageIsLoggedOnceAcrossRequests(t *testing.T) {
	t.Parallel()
	logs := &testutil.Logs{}
	tc := newTestClusterWith(t, 3, 64<<20, func(i int, cfg *Config) {
		if i == 0 {
			cfg.Logger = logs.Logger()
		}
	})
	coord, victim := tc.nodes[0], tc.nodes[2]

	// The coordinators reach the victim through a proxy that can fail.
	var down atomic.Bool
	proxy := serveFake(t, func(gs *grpc.Server) {
		kvringv1.RegisterPeerServer(gs, flakyPeer{PeerServer: owner.NewService(victim.svc.Owner), down: &down})
	})
	var members []ring.Member
	for _, nd := range tc.nodes {
		m := ring.Member{ID: nd.id, Addr: nd.addr}
		if nd == victim {
			m.Addr = proxy
		}
		members = append(members, m)
	}
	tc.useMembers(t, members)

	c := routedClient(t, coord.addr, 3, 1, func(cfg *client.Config) { cfg.DisableRouting = true }) // every node owns every chunk; all calls through coord
	ctx := context.Background()
	var chunks []client.Chunk
	var ids []client.ChunkID
	for i := uint64(0); i < 9; i++ {
		chunks = append(chunks, chunkOf(9000+i, 10_000))
		ids = append(ids, chunks[i].ID)
	}
	if _, err := c.Put(ctx, chunks[:5]); err != nil {
		t.Fatal(err)
	}

	// A lookup asks the coordinator first (it owns every chunk) and the
	// owner that is down never; every put writes to it too.
	down.Store(true)
	for i := range 4 {
		lr, err := c.Lookup(ctx, ids[:5], 0)
		if err != nil || lr.Held != 5 {
			t.Fatalf("lookup while an owner is down: %+v %v", lr, err)
		}
		res, err := c.Put(ctx, chunks[5+i:6+i])
		if err != nil || res[0].Status != client.Stored || !res[0].Degraded {
			t.Fatalf("put while an owner is down: %+v %v", res, err)
		}
	}
	got, err := c.Get(ctx, ids[:9])
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !g.Found {
			t.Fatalf("get %d while an owner is down: %q", i, g.Reason)
		}
	}
	s := scrape(t, coord.reg)
	failures := s.get(t, "kvring_peer_failures_total")
	if failures < 4 || s.get(t, "kvring_peers_unreachable") != 1 {
		t.Fatalf("failures=%v unreachable=%v, want ≥4 (4 puts) and 1", failures, s.get(t, "kvring_peers_unreachable"))
	}
	if warn := logs.Lines("level=WARN", `msg="peer unreachable"`, "peer="+victim.id); len(warn) != 1 {
		t.Fatalf("%d 'peer unreachable' lines over %v failures, want 1:\n%s", len(warn), failures, logs.Lines(""))
	}
	if n := len(logs.Lines("peer unreachable")); n != 1 {
		t.Fatalf("%d 'peer unreachable' lines in all, want 1", n)
	}

	// Back: a lookup of a chunk the coordinator lost asks the other owners.
	down.Store(false)
	fp, err := c.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := coord.st.Evict(namespace.StoreName("test/model", fp), store.ID(ids[0])); err != nil {
		t.Fatal(err)
	}
	if lr, err := c.Lookup(ctx, ids[:1], 0); err != nil || lr.Held != 1 {
		t.Fatalf("lookup once the owner is back: %+v %v", lr, err)
	}
	back := logs.Lines("level=INFO", `msg="peer reachable again"`, "peer="+victim.id)
	if len(back) != 1 || !strings.Contains(back[0], fmt.Sprintf("failures=%d ", int(failures))) {
		t.Fatalf("recovery lines %q, want one with failures=%d", back, int(failures))
	}
	s2 := scrape(t, coord.reg)
	if s2.get(t, "kvring_peers_unreachable") != 0 || s2.get(t, "kvring_peer_failures_total") != failures {
		t.Fatalf("after recovery: unreachable=%v failures=%v", s2.get(t, "kvring_peers_unreachable"), s2.get(t, "kvring_peer_failures_total"))
	}
	checkNoCounterWentDown(t, s, s2)
}
