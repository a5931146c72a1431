package placement

import (
	"math"
	"testing"

	"github.com/kvring/kvring/ring"
)

// handCluster is a 2-partition cluster whose owners are given: owners[p] lists partition p's owners.
func handCluster(ids []string, owners [][]int32) *Cluster {
	c := &Cluster{IDs: ids, Width: len(owners[0]), Partitions: len(owners)}
	for _, o := range owners {
		c.Owners = append(c.Owners, o...)
	}
	return c
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// fourChunks is three requests over chunks 0..3: [0 1], [0 1 2 3], [0 1].
func fourChunks(parts []int32) *Workload {
	return &Workload{Name: "hand", Prompts: [][]int32{{0, 1}, {0, 1, 2, 3}, {0, 1}}, Parts: parts, Partitions: 2}
}

// On a real 2-node ring, chunks alternating between the two nodes: per-chunk placement asks both nodes
// every time and balances everything; groups of 2 put everything on one node.
func TestTwoNodeRingPerChunkVersusGroups(t *testing.T) {
	t.Parallel()
	cfg := SimRingConfig(ring.DefaultConfig())
	topo, err := NewTopology(2, 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var onNode [2]int32 // a partition whose primary is node i
	found := [2]bool{}
	for p := range cfg.PartitionCount {
		o := topo.Base.Owners[p*topo.Base.Width]
		if !found[o] {
			onNode[o], found[o] = int32(p), true
		}
	}
	w := fourChunks([]int32{onNode[0], onNode[1], onNode[0], onNode[1]})
	w.Partitions = cfg.PartitionCount

	a, err := Simulate(w, topo, Scheme{Name: "A", Groups: []int{1}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "A asked mean", a.AskedMean, 2)
	near(t, "A asked p99", a.AskedP99, 2)
	near(t, "A access skew", a.AccessSkew, 1)
	near(t, "A stored skew", a.StoredSkew, 1) // node-0 holds chunks 0 and 2, node-1 chunks 1 and 3
	near(t, "A read skew", a.ReadSkew, 1)     // requests 2 and 3 read chunks 0 and 1: 2 reads each
	near(t, "A extra stored", a.ExtraStored, 0)
	if a.DistinctChunks != 4 {
		t.Errorf("A distinct chunks = %d, want 4", a.DistinctChunks)
	}

	b, err := Simulate(w, topo, Scheme{Name: "B2", Groups: []int{2}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Both group keys (chunks 0 and 2) live on node-0: one node asked, everything there.
	near(t, "B2 asked mean", b.AskedMean, 1)
	near(t, "B2 access skew", b.AccessSkew, 2) // calls [3 0], mean 1.5
	near(t, "B2 stored skew", b.StoredSkew, 2) // copies [4 0]
}

// Early stop asks groups one wave at a time and stops after the first group not entirely held.
func TestEarlyStopCountsOnlyWavesAsked(t *testing.T) {
	t.Parallel()
	topo := &Topology{Base: handCluster([]string{"a", "b"}, [][]int32{{0}, {1}})}
	w := fourChunks([]int32{0, 1, 1, 0})
	s := Scheme{Name: "C1", Groups: []int{1}, EarlyStop: true, FirstWave: 1, WaveGrowth: 1}
	r, err := Simulate(w, topo, s, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Request 1 holds nothing: asks chunk 0 (a), stops: 1 call. Request 2 holds 0,1: asks 0 (a), 1 (b),
	// 2 (b, misses): 3 calls in 3 waves. Request 3 holds 0,1: asks 0 (a), 1 (b), then the prompt ends: 2.
	near(t, "asked mean", r.AskedMean, 2)
	near(t, "asked p99", r.AskedP99, 3)
	near(t, "round trips", r.RoundTripsMean, 2)
	near(t, "access skew", r.AccessSkew, 1) // a: 3 calls, b: 3 calls
	near(t, "read skew", r.ReadSkew, 1)     // 2 reads of chunk 0 on a, 2 of chunk 1 on b

	// Doubling waves: request 2 asks {0} then {1, 2} (both on b: one call), 2 calls in 2 waves.
	s.WaveGrowth = 2
	r, err = Simulate(w, topo, s, 1)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "doubling asked mean", r.AskedMean, float64(1+2+2)/3)
	near(t, "doubling round trips", r.RoundTripsMean, float64(1+2+2)/3)
}

// A join that hands one partition to the new node moves exactly the chunks on it.
func TestMovedCountsCopiesThatChangeNode(t *testing.T) {
	t.Parallel()
	base := handCluster([]string{"a", "b"}, [][]int32{{0, 1}, {1, 0}})
	joined := handCluster([]string{"a", "b", "c"}, [][]int32{{2, 0}, {1, 0}})
	joined.PartitionsMoved = 1
	topo := &Topology{Base: base, Joins: []*Cluster{joined}}
	w := fourChunks([]int32{0, 1, 1, 1})

	r, err := Simulate(w, topo, Scheme{Name: "A", Groups: []int{1}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "moved", r.Moved, 0.25) // chunk 0 goes from a to c
	near(t, "moved ratio", r.MovedRatio, 0.25*3)
	near(t, "worst moved ratio", r.MovedMaxRatio, 0.25*3)
	near(t, "partition moved ratio", r.PartitionMovedRatio, 0.5*3)
	near(t, "stored skew", r.StoredSkew, 1.5) // a 1, b 3
	near(t, "partition skew", r.PartitionSkew, 1)

	// Every chunk on both owners: 8 copies; partition 0's owners go from {a, b} to {c, a}: 1 copy moves.
	all := Scheme{Name: "P2C", Groups: []int{1}, Spread: SpreadAll, Replicas: 2, Pick: PickLeastLoaded}
	r, err = Simulate(w, topo, all, 1)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "p2c extra stored", r.ExtraStored, 1)
	near(t, "p2c stored skew", r.StoredSkew, 1)
	near(t, "p2c moved", r.Moved, 1.0/8)
	near(t, "p2c access skew", r.AccessSkew, 1) // least-loaded keeps a and b at 4 calls each
}

// A group becomes hot after HotAfter lookups; only then is it spread and stored on Replicas owners.
func TestHotSpreadStartsAtThreshold(t *testing.T) {
	t.Parallel()
	topo := &Topology{Base: handCluster([]string{"a", "b"}, [][]int32{{0, 1}, {1, 0}})}
	w := &Workload{Name: "hot", Prompts: [][]int32{{0}, {0}, {0}, {0}}, Parts: []int32{0}, Partitions: 2}
	s := Scheme{Name: "hot", Groups: []int{1}, Spread: SpreadHot, HotAfter: 2, Replicas: 2, Pick: PickLeastLoaded}
	r, err := Simulate(w, topo, s, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Lookups 1 and 2 go to the primary a (not hot yet); 3 and 4 to the least-loaded owner: b (0, then 1 call).
	near(t, "access skew", r.AccessSkew, 1) // a 2, b 2
	near(t, "extra stored", r.ExtraStored, 1)

	s.Spread = SpreadNone
	r, err = Simulate(w, topo, s, 1)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "unspread access skew", r.AccessSkew, 2)
}

func TestSimulateRejectsMismatchedPartitions(t *testing.T) {
	t.Parallel()
	topo := &Topology{Base: handCluster([]string{"a"}, [][]int32{{0}, {0}})}
	w := &Workload{Name: "w", Partitions: 3}
	if _, err := Simulate(w, topo, Scheme{Name: "A", Groups: []int{1}}, 1); err == nil {
		t.Fatal("Simulate accepted a workload hashed for another partition count")
	}
	if _, err := Simulate(&Workload{Partitions: 2}, topo, Scheme{Name: "bad"}, 1); err == nil {
		t.Fatal("Simulate accepted a scheme without group sizes")
	}
}

// A hot group spread with GrowWidth lives on ring.SpreadWidth(N) distinct members of its spread set.
func TestGrowWidthSpreadsOverTheSpreadSet(t *testing.T) {
	t.Parallel()
	cfg := SimRingConfig(ring.DefaultConfig())
	topo, err := NewTopology(128, 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &Workload{Name: "one hot chunk", Parts: []int32{4242}, Partitions: cfg.PartitionCount}
	for range 10 {
		w.Prompts = append(w.Prompts, []int32{0})
	}
	s := Scheme{Name: "grow", Groups: []int{1}, Spread: SpreadHot, HotAfter: 1, Replicas: 8, GrowWidth: true,
		Members: MembersSpreadSet, Pick: PickLeastLoaded}
	res, err := Simulate(w, topo, s, 1)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "extra stored", res.ExtraStored, float64(ring.SpreadWidth(128)-1))
	near(t, "asked mean", res.AskedMean, 1)
	s.Members = MembersOwners
	if _, err := Simulate(w, topo, s, 1); err == nil {
		t.Error("GrowWidth without MembersSpreadSet was accepted")
	}
}
