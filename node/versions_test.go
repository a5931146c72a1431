package node

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/internal/buildinfo"
	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/membership"
	"github.com/kvring/kvring/ring"
)

// versionedNodeConfig is testNodeConfig for a node of build version that
// supports versions, joining seeds.
func versionedNodeConfig(t *testing.T, version string, v membership.Versions, logs *testutil.Logs, seeds ...string) Config {
	cfg := testNodeConfig(t)
	cfg.Store.MemoryLimit = 32 << 20
	cfg.Build = buildinfo.Info{Version: version}
	cfg.Membership.Versions = v
	cfg.Membership.Join = seeds
	if logs != nil {
		cfg.Logger = logs.Logger()
		cfg.Membership.Logger = cfg.Logger
	}
	return cfg
}

// versionChunks are n chunks of 4 KiB whose bytes follow from their number.
func versionChunks(from, n int) []client.Chunk {
	out := make([]client.Chunk, n)
	for i := range out {
		data := bytes.Repeat([]byte(fmt.Sprintf("chunk %d;", from+i)), 512)[:4096]
		out[i] = client.Chunk{ID: client.NextChunkID(client.ChunkID{}, []uint32{uint32(from + i), 7}), Data: data}
	}
	return out
}

// awaitVersions waits until every node sees every other alive, each at the
// active versions want, its ring of len(nodes) members built with want's
// placement.
func awaitVersions(t *testing.T, step string, want membership.ActiveVersions, nodes ...*Node) {
	t.Helper()
	testutil.Eventually(t, step+": every node at "+fmt.Sprint(want), 30*time.Second, func() bool {
		for _, n := range nodes {
			ci, ok1 := n.Cluster()
			ri, ok2 := n.RingInfo()
			alive := 0
			for _, m := range ci.Members {
				if m.Liveness == "alive" {
					alive++
				}
			}
			if !ok1 || !ok2 || ci.Active != want || ri.Placement != want.Placement || len(ri.Members) != len(nodes) || alive != len(nodes) {
				return false
			}
		}
		return true
	})
}

// readAll fails the test unless every chunk reads back with its bytes
// within the deadline (chunks move after a placement switch: reads find
// them where the hand-off has them meanwhile).
func readAll(t *testing.T, step string, c *client.Client, chunks []client.Chunk) {
	t.Helper()
	ids := make([]client.ChunkID, len(chunks))
	for i, ch := range chunks {
		ids[i] = ch.ID
	}
	var missing []int
	var lastErr error
	t0 := time.Now()
	defer func() {
		t.Logf("%s: %d chunks read back after %v (missing %v, last error %v)", step, len(chunks), time.Since(t0), missing, lastErr)
	}()
	testutil.Eventually(t, step+": every chunk written before to read back", 30*time.Second, func() bool {
		res, err := c.Get(t.Context(), ids)
		if err != nil {
			missing = append(missing[:0], -1)
			lastErr = err
			return false
		}
		missing = missing[:0]
		for i, r := range res {
			if !r.Found {
				missing = append(missing, i)
			} else if !bytes.Equal(r.Data, chunks[i].Data) {
				t.Fatalf("%s: chunk %d read back other bytes", step, i)
			}
		}
		return len(missing) == 0
	})
}

func versionClient(t *testing.T, seeds ...string) *client.Client {
	c, err := client.New(client.Config{Conn: client.ConnConfig{Seeds: seeds}, Namespace: "versions/test",
		Schema: client.Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16}, ReplicationFactor: 1, MinReplicas: 1,
		Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return c.State().Status == client.ConnConnected })
	return c
}

func putAll(t *testing.T, c *client.Client, chunks []client.Chunk) {
	t.Helper()
	res, err := c.Put(t.Context(), chunks)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Status != client.Stored && r.Status != client.AlreadyHeld {
			t.Fatalf("put: %+v", r)
		}
	}
}

// restart drains and closes n, then starts it again from the same data
// directory as a build of version supporting v (a rolling upgrade's step).
func restart(t *testing.T, n *Node, cfg Config, version string, v membership.Versions, seeds ...string) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := n.Leave(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	cfg.Build = buildinfo.Info{Version: version}
	cfg.Membership.Versions = v
	cfg.Membership.Join = seeds
	return startNode(t, cfg)
}

// TestANodeAheadUsesTheOlderVersionsUntilEveryMemberHasThem rehearses a
// placement and wire change: a node one version ahead on both
// (membership.RehearsalVersions) joins two current nodes and uses the
// current versions, the cluster stays whole and what was written before
// stays readable; the two others are upgraded one at a time (drained,
// restarted), and the cluster switches placement only once the last current
// member is gone, with everything written before the switch still readable
// after it. Finally one node is downgraded: the cluster steps back.
func TestANodeAheadUsesTheOlderVersionsUntilEveryMemberHasThem(t *testing.T) {
	t.Parallel()
	cur, next := membership.DefaultVersions(), membership.RehearsalVersions()
	atCur := membership.ActiveVersions{Placement: ring.PlacementV2, Wire: membership.WireV1}
	atNext := membership.ActiveVersions{Placement: ring.PlacementV3, Wire: membership.WireV2}
	cfgA := versionedNodeConfig(t, "v0.4.0", cur, nil)
	a := startNode(t, cfgA)
	cfgB := versionedNodeConfig(t, "v0.4.0", cur, nil, a.GossipAddr())
	b := startNode(t, cfgB)
	awaitVersions(t, "two current nodes", atCur, a, b)
	c := versionClient(t, a.GRPCAddr(), b.GRPCAddr())
	before := versionChunks(0, 64)
	putAll(t, c, before)

	cfgC := versionedNodeConfig(t, "v0.5.0-rehearsal", next, nil, a.GossipAddr())
	nc := startNode(t, cfgC)
	awaitVersions(t, "a node ahead joined", atCur, a, b, nc)
	readAll(t, "a node ahead joined", c, before)
	during := versionChunks(64, 64)
	putAll(t, c, during)

	b = restart(t, b, cfgB, "v0.5.0-rehearsal", next, nc.GossipAddr())
	awaitVersions(t, "b upgraded, a still current", atCur, a, b, nc)
	c = versionClient(t, a.GRPCAddr(), b.GRPCAddr(), nc.GRPCAddr()) // a restarted node listens on another port
	readAll(t, "b upgraded", c, slices.Concat(before, during))

	a = restart(t, a, cfgA, "v0.5.0-rehearsal", next, nc.GossipAddr())
	awaitVersions(t, "every node upgraded", atNext, a, b, nc)
	c = versionClient(t, a.GRPCAddr(), b.GRPCAddr(), nc.GRPCAddr())
	readAll(t, "after the switch", c, slices.Concat(before, during))
	after := versionChunks(128, 32)
	putAll(t, c, after)

	nc = restart(t, nc, cfgC, "v0.4.0", cur, a.GossipAddr())
	awaitVersions(t, "one node downgraded", atCur, a, b, nc)
	c = versionClient(t, a.GRPCAddr(), b.GRPCAddr(), nc.GRPCAddr())
	readAll(t, "after the downgrade", c, slices.Concat(before, during, after))
	for _, n := range []*Node{a, b, nc} {
		ci, _ := n.Cluster()
		for _, m := range ci.Members {
			if want := map[bool]string{true: "v0.4.0", false: "v0.5.0-rehearsal"}[m.ID == nc.NodeID()]; m.Version != want {
				t.Errorf("%s lists %s at version %q, want %q", n.NodeID(), m.ID, m.Version, want)
			}
		}
	}
}

// TestNodesWithNoVersionInCommonRefuseEachOtherNamingBothBuilds: a node
// that supports only the next placement cannot join a cluster of current
// nodes: both sides log the refusal with both builds, and the cluster stays
// as it was.
func TestNodesWithNoVersionInCommonRefuseEachOtherNamingBothBuilds(t *testing.T) {
	t.Parallel()
	var logsA, logsD testutil.Logs
	a := startNode(t, versionedNodeConfig(t, "v0.4.0", membership.DefaultVersions(), &logsA))
	only3 := membership.Versions{Placement: membership.Range{Min: ring.PlacementV3, Max: ring.PlacementV3},
		Wire: membership.Range{Min: membership.WireV1, Max: membership.WireV2}}
	d := startNode(t, versionedNodeConfig(t, "v0.6.0", only3, &logsD, a.GossipAddr()))
	for name, logs := range map[string]*testutil.Logs{"the current node": &logsA, "the node too far ahead": &logsD} {
		testutil.Eventually(t, name+" to log the refusal naming both builds", 20*time.Second, func() bool {
			return logs.Count(`msg="refusing peer: it cannot join this cluster"`, "no placement version in common",
				"placement 3, wire 1-2", "placement 2, wire 1", "v0.6.0", "v0.4.0") > 0
		})
	}
	for _, n := range []*Node{a, d} {
		if ri, _ := n.RingInfo(); len(ri.Members) != 1 {
			t.Errorf("%s's ring has %d members, want itself alone", n.NodeID(), len(ri.Members))
		}
	}
}
