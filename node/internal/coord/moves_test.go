package coord_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvring/kvring/node/internal/clustertest"
	"github.com/kvring/kvring/node/internal/moves"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
)

// askLog records which node's Peer service was asked Has about which ids.
type askLog struct {
	mu    sync.Mutex
	nodes []string // node id per Peer service index, set once the nodes run
	asked map[string]map[string]bool
}

func (l *askLog) wrap(i int, peer kvringv1.PeerServer) kvringv1.PeerServer {
	return &askingPeer{PeerServer: peer, l: l, i: i}
}

func (l *askLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = map[string]map[string]bool{}
}

// nodesAsked returns the ids of the nodes asked about id.
func (l *askLog) nodesAsked(id []byte) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for n := range l.asked[string(id)] {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

type askingPeer struct {
	kvringv1.PeerServer
	l *askLog
	i int
}

func (p *askingPeer) Has(ctx context.Context, req *kvringv1.HasRequest) (*kvringv1.HasResponse, error) {
	p.l.mu.Lock()
	for _, id := range req.GetIds() {
		if p.l.asked[string(id)] == nil {
			p.l.asked[string(id)] = map[string]bool{}
		}
		p.l.asked[string(id)][p.l.nodes[p.i]] = true
	}
	p.l.mu.Unlock()
	return p.PeerServer.Has(ctx, req)
}

func membersOf(nodes []*clustertest.Node) []ring.Member {
	out := make([]ring.Member, len(nodes))
	for i, n := range nodes {
		out[i] = n.Member()
	}
	return out
}

// summaries are entries giving every member of rg summary s.
func summaries(rg *ring.Ring, s moves.Summary) []moves.Entry {
	var out []moves.Entry
	for _, m := range rg.Members() {
		out = append(out, moves.Entry{Member: m, Summary: &s})
	}
	return out
}

// knowing returns a ring history that knows rings rs.
func knowing(rs ...*ring.Ring) func(uint64) *ring.Ring {
	return func(h uint64) *ring.Ring {
		for _, r := range rs {
			if moves.RingHash(r) == h {
				return r
			}
		}
		return nil
	}
}

// startMoving starts nodes core nodes (replication up to 2) whose Has
// calls are logged, with a namespace of replication r.
func startMoving(t *testing.T, nodes, r int) (*clustertest.Core, *askLog, *kvringv1.NamespaceRef) {
	log := &askLog{asked: map[string]map[string]bool{}}
	c := clustertest.StartCore(t, clustertest.CoreConfig{Nodes: nodes, ReplicationFactor: 2, Wrap: log.wrap})
	for _, n := range c.Nodes {
		log.nodes = append(log.nodes, n.ID)
	}
	return c, log, c.Register(t, "moves/ns", uint32(r), 1)
}

// lookupEach looks each chunk up alone through node i and returns how many
// were counted held.
func lookupEach(t *testing.T, c *clustertest.Core, i int, ref *kvringv1.NamespaceRef, chunks []clustertest.Chunk) int {
	t.Helper()
	cache, held := c.Cache(t, i), 0
	for _, ch := range chunks {
		resp, err := cache.Lookup(context.Background(), &kvringv1.LookupRequest{Namespace: ref, Ids: [][]byte{ch.ID}})
		if err != nil {
			t.Fatal(err)
		}
		held += int(resp.GetHeld())
	}
	return held
}

// TestALookupDuringAJoinAsksOnlyTheOwnersAndThePreviousOwners: a node joins
// and no member has handed off yet (every summary is still on the ring
// before the join): a lookup of a chunk asks its owners on the new ring and
// its owners on the ring before (who hold it), no other member, and finds
// every chunk; a get finds every chunk too. Once the summaries are on the
// ring the reads use and name nothing, a lookup asks the owners alone.
func TestALookupDuringAJoinAsksOnlyTheOwnersAndThePreviousOwners(t *testing.T) {
	t.Parallel()
	c, log, ref := startMoving(t, 8, 1)
	before := c.SetMembers(t, membersOf(c.Nodes[:7]), 2, 2)
	var chunks []clustertest.Chunk
	for n := range uint64(120) {
		chunks = append(chunks, clustertest.ChunkOf(9000+n, 512))
	}
	put(t, c, 0, ref, chunks...)
	after := c.SetMembers(t, membersOf(c.Nodes), 3, 2) // node 7 joins
	c.SetMoves(moves.NewView(after, knowing(before), summaries(after, moves.Summary{Ring: moves.RingHash(before)}), time.Time{}))

	reader := c.Nodes[1]
	if held := lookupEach(t, c, 1, ref, chunks); held != len(chunks) {
		t.Fatalf("lookups during the join counted %d of %d chunks", held, len(chunks))
	}
	moved := 0
	for _, ch := range chunks {
		allowed := map[string]bool{}
		for _, m := range slices.Concat(after.Owners("moves/ns", ch.ID, 1), before.Owners("moves/ns", ch.ID, 1)) {
			allowed[m.ID] = true
		}
		if !slices.Equal(idsOf(after.Owners("moves/ns", ch.ID, 1)), idsOf(before.Owners("moves/ns", ch.ID, 1))) {
			moved++
		}
		for _, n := range log.nodesAsked(ch.ID) {
			if !allowed[n] && n != reader.ID {
				t.Fatalf("chunk %x: node %s asked; it owns the chunk neither now nor before the join (allowed %v)", ch.ID[:4], n, allowed)
			}
		}
	}
	if moved == 0 {
		t.Fatal("no chunk changed owners with the join: the test proves nothing")
	}
	got, err := clustertest.Get(context.Background(), c.Cache(t, 1), ref, clustertest.IDs(chunks), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if g.Header.GetStatus() != kvringv1.ReadStatus_READ_STATUS_FOUND {
			t.Fatalf("get during the join: chunk %d %v (%s)", i, g.Header.GetStatus(), g.Header.GetReason())
		}
	}

	// Settled: every summary is on the ring before the join (as if it had
	// not happened) and names nothing: only owners are asked.
	c.SetMembers(t, membersOf(c.Nodes[:7]), 4, 2)
	c.SetMoves(moves.NewView(c.Ring(), knowing(), summaries(c.Ring(), moves.Summary{Ring: moves.RingHash(c.Ring())}), time.Time{}))
	log.reset()
	if held := lookupEach(t, c, 1, ref, chunks); held != len(chunks) {
		t.Fatalf("settled lookups counted %d of %d chunks", held, len(chunks))
	}
	for _, ch := range chunks {
		owners := idsOf(c.Ring().Owners("moves/ns", ch.ID, 1))
		for _, n := range log.nodesAsked(ch.ID) {
			if !slices.Contains(owners, n) {
				t.Fatalf("chunk %x: settled, node %s asked; owners %v", ch.ID[:4], n, owners)
			}
		}
	}
}

// TestReadsAskEveryMemberWhoseKnowledgeIsMissing: a reader that never had
// the ring its peers' summaries were computed on (it restarted), and a node
// whose summary is "may hold anything" (it restarted and has not planned
// yet), are asked about every partition: the chunks they hold are found. With
// no such knowledge, reads ask the owners alone and miss them.
func TestReadsAskEveryMemberWhoseKnowledgeIsMissing(t *testing.T) {
	t.Parallel()
	c, log, ref := startMoving(t, 5, 1)
	before := c.SetMembers(t, membersOf(c.Nodes[:4]), 2, 1)
	var chunks []clustertest.Chunk
	for n := range uint64(80) {
		chunks = append(chunks, clustertest.ChunkOf(7000+n, 512))
	}
	put(t, c, 0, ref, chunks...)
	after := c.SetMembers(t, membersOf(c.Nodes), 3, 1) // node 4 joins: the chunks it owns are elsewhere

	c.SetMoves(nil) // nobody known to hold chunks elsewhere: owners only
	if held := lookupEach(t, c, 0, ref, chunks); held == len(chunks) {
		t.Fatal("lookups found every chunk while none is where the ring says: the test proves nothing")
	}

	// The reader never had the ring the summaries are on: every member is
	// asked, every chunk found.
	c.SetMoves(moves.NewView(after, knowing(), summaries(after, moves.Summary{Ring: moves.RingHash(before)}), time.Time{}))
	if held := lookupEach(t, c, 0, ref, chunks); held != len(chunks) {
		t.Fatalf("a reader without the summaries' ring counted %d of %d chunks", held, len(chunks))
	}

	// Node 1 restarted (its summary: anything); the others' summaries are
	// on the ring the reads use and name nothing. The chunks node 1 holds
	// are found, and only node 1 is asked besides their owners.
	entries := summaries(after, moves.Summary{Ring: moves.RingHash(after)})
	for i := range entries {
		if entries[i].Member.ID == c.Nodes[1].ID {
			unknown := moves.Unknown()
			entries[i].Summary = &unknown
		}
	}
	c.SetMoves(moves.NewView(after, knowing(before), entries, time.Time{}))
	log.reset()
	var onNode1 []clustertest.Chunk
	for _, ch := range chunks {
		if before.Owners("moves/ns", ch.ID, 1)[0].ID == c.Nodes[1].ID {
			onNode1 = append(onNode1, ch)
		}
	}
	if held := lookupEach(t, c, 0, ref, onNode1); held != len(onNode1) {
		t.Fatalf("lookups counted %d of the %d chunks the restarted node holds", held, len(onNode1))
	}
	for _, ch := range onNode1 {
		allowed := append(idsOf(after.Owners("moves/ns", ch.ID, 1)), c.Nodes[1].ID, c.Nodes[0].ID)
		for _, n := range log.nodesAsked(ch.ID) {
			if !slices.Contains(allowed, n) {
				t.Fatalf("chunk %x: node %s asked; allowed %v", ch.ID[:4], n, allowed)
			}
		}
	}
}

func idsOf(ms []ring.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}
