package ring

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// TestGoldenPlacement pins the placement of a fixed 3-member ring. If it fails, placement changed: every
// deployed cluster would lose its cache on upgrade. Bump placementVersion (so Fingerprint changes) and update
// the table only if that is intended.
func TestGoldenPlacement(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.ReplicationFactor = 3
	r := mustNew(t, []Member{{ID: "node-a"}, {ID: "node-b"}, {ID: "node-c"}}, 1, cfg)
	golden := []struct {
		namespace string
		label     string // the chunk id is SHA-256(label)
		partition int
		owners    []string
	}{
		{"llama3-8b/bf16/16/tp0", "chunk-0", 56589, []string{"node-a", "node-b", "node-c"}},
		{"llama3-8b/bf16/16/tp0", "chunk-1", 18264, []string{"node-c", "node-a", "node-b"}},
		{"llama3-8b/bf16/16/tp0", "chunk-2", 8775, []string{"node-c", "node-a", "node-b"}},
		{"llama3-8b/bf16/16/tp0", "chunk-3", 60057, []string{"node-b", "node-a", "node-c"}},
		{"llama3-8b/bf16/16/tp0", "chunk-4", 49098, []string{"node-a", "node-b", "node-c"}},
		{"qwen2-7b/fp16/16/tp1", "chunk-0", 33698, []string{"node-a", "node-b", "node-c"}},
		{"qwen2-7b/fp16/16/tp1", "chunk-1", 22775, []string{"node-c", "node-b", "node-a"}},
		{"qwen2-7b/fp16/16/tp1", "chunk-2", 55981, []string{"node-a", "node-b", "node-c"}},
		{"qwen2-7b/fp16/16/tp1", "chunk-3", 31982, []string{"node-c", "node-a", "node-b"}},
		{"qwen2-7b/fp16/16/tp1", "chunk-4", 8122, []string{"node-a", "node-c", "node-b"}},
	}
	for _, g := range golden {
		id := testID(g.label)
		if got := r.Partition(g.namespace, id); got != g.partition {
			t.Errorf("Partition(%q, %s) = %d, want %d", g.namespace, g.label, got, g.partition)
		}
		if got := ownerIDs(r.Owners(g.namespace, id, 3)); !slices.Equal(got, g.owners) {
			t.Errorf("Owners(%q, %s, 3) = %v, want %v", g.namespace, g.label, got, g.owners)
		}
	}
	wantLoads := map[string]int{"node-a": 20726, "node-b": 23651, "node-c": 21144}
	if got := r.LoadDistribution(); !mapsEqual(got, wantLoads) {
		t.Errorf("LoadDistribution() = %v, want %v", got, wantLoads)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestPlacementIgnoresMemberOrderAndAddr(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.ReplicationFactor = 3
	members := testMembers("node-", 7)
	ref := mustNew(t, members, 1, cfg)
	rng := rand.New(rand.NewPCG(1, 1))
	for range 5 {
		shuffled := slices.Clone(members)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for i := range shuffled {
			shuffled[i].Addr = "elsewhere:1"
		}
		r := mustNew(t, shuffled, 2, cfg)
		if moved := Moved(ref, r); moved != 0 {
			t.Fatalf("shuffled members moved %d partitions", moved)
		}
		for p := range cfg.PartitionCount {
			if a, b := ownerIDs(ref.PartitionOwners(p, 3)), ownerIDs(r.PartitionOwners(p, 3)); !slices.Equal(a, b) {
				t.Fatalf("partition %d: owners %v vs %v after shuffling members", p, a, b)
			}
		}
	}
}

func TestNewRejectsBadMembers(t *testing.T) {
	t.Parallel()
	for name, members := range map[string][]Member{
		"duplicate ID": {{ID: "a"}, {ID: "b"}, {ID: "a", Addr: "other:1"}},
		"empty ID":     {{ID: "a"}, {ID: "", Addr: "x:1"}},
	} {
		if _, err := New(members, 1, DefaultConfig()); !errors.Is(err, ErrInvalidMember) {
			t.Errorf("%s: New error = %v, want ErrInvalidMember", name, err)
		}
	}
}

func TestEmptyRingHasNoOwners(t *testing.T) {
	t.Parallel()
	for _, members := range [][]Member{nil, {}} {
		r := mustNew(t, members, 3, DefaultConfig())
		id := testID("x")
		if r.Len() != 0 || r.Epoch() != 3 || len(r.Members()) != 0 || len(r.LoadDistribution()) != 0 || r.MaxLoad() != 0 {
			t.Fatalf("empty ring: Len %d Epoch %d Members %v Loads %v MaxLoad %d", r.Len(), r.Epoch(), r.Members(), r.LoadDistribution(), r.MaxLoad())
		}
		if got := r.Owners("ns", id, 1); got != nil {
			t.Fatalf("Owners on empty ring = %v, want nil", got)
		}
		if _, err := r.Primary("ns", id); !errors.Is(err, ErrNoMembers) {
			t.Fatalf("Primary on empty ring: err = %v, want ErrNoMembers", err)
		}
		if p := r.Partition("ns", id); p < 0 || p >= r.Config().PartitionCount {
			t.Fatalf("Partition on empty ring = %d, out of range", p)
		}
	}
}

func TestOwnersCountIsCapped(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.ReplicationFactor = 3
	id := testID("chunk")
	for _, tc := range []struct{ members, n, want int }{
		{5, 0, 0}, {5, -1, 0}, {5, 1, 1}, {5, 3, 3}, {5, 4, 3}, {2, 3, 2}, {1, 3, 1},
	} {
		r := mustNew(t, testMembers("n", tc.members), 1, cfg)
		if got := len(r.Owners("ns", id, tc.n)); got != tc.want {
			t.Errorf("%d members, RF 3: len(Owners(n=%d)) = %d, want %d", tc.members, tc.n, got, tc.want)
		}
	}
	r := mustNew(t, testMembers("n", 3), 1, cfg)
	for _, p := range []int{-1, cfg.PartitionCount} {
		if got := r.PartitionOwners(p, 1); got != nil {
			t.Errorf("PartitionOwners(%d) = %v, want nil", p, got)
		}
	}
}

func TestOwnersAgreeAcrossLookupMethods(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.ReplicationFactor = 2
	r := mustNew(t, testMembers("node-", 5), 1, cfg)
	buf := make([]Member, 0, 2)
	for i := range 1000 {
		id := testID(string(rune(i)))
		owners := r.Owners("ns", id, 2)
		primary, err := r.Primary("ns", id)
		if err != nil || primary != owners[0] {
			t.Fatalf("Primary = %v, %v; Owners[0] = %v", primary, err, owners[0])
		}
		if got := r.AppendOwners(buf[:0], "ns", id, 2); !slices.Equal(got, owners) {
			t.Fatalf("AppendOwners = %v, Owners = %v", got, owners)
		}
		if got := r.PartitionOwners(r.Partition("ns", id), 2); !slices.Equal(got, owners) {
			t.Fatalf("PartitionOwners = %v, Owners = %v", got, owners)
		}
	}
}

func TestNamespacesSeparateKeys(t *testing.T) {
	t.Parallel()
	r := mustNew(t, testMembers("n", 3), 1, DefaultConfig())
	id := testID("same id")
	same := 0
	for i := range 100 {
		if r.Partition("ns-a", id) == r.Partition("ns-"+string(rune('b'+i)), id) {
			same++
		}
	}
	if same > 3 {
		t.Fatalf("%d of 100 namespaces put the same id in the same partition", same)
	}
	// The namespace length is hashed, so moving a byte between namespace and id changes the key.
	if keyHash("ab", []byte("c")) == keyHash("a", []byte("bc")) {
		t.Fatal(`("ab","c") and ("a","bc") hash alike`)
	}
}

func TestMembersReturnsSortedCopy(t *testing.T) {
	t.Parallel()
	r := mustNew(t, []Member{{ID: "c"}, {ID: "a"}, {ID: "b"}}, 1, DefaultConfig())
	ms := r.Members()
	if got := ownerIDs(ms); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Members() = %v, want sorted", got)
	}
	ms[0].ID = "mutated"
	if r.Members()[0].ID != "a" {
		t.Fatal("mutating Members() changed the ring")
	}
}

func TestMovedCountsPrimaryChanges(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	three := mustNew(t, testMembers("n", 3), 1, cfg)
	four := mustNew(t, testMembers("n", 4), 2, cfg)
	empty := mustNew(t, nil, 3, cfg)
	other := cfg
	other.PartitionCount = 101
	small := mustNew(t, testMembers("n", 3), 4, other)
	naive := 0 // reference: compare primaries partition by partition
	for p := range cfg.PartitionCount {
		if three.PartitionOwners(p, 1)[0].ID != four.PartitionOwners(p, 1)[0].ID {
			naive++
		}
	}
	if joined := four.LoadDistribution()["n3"]; naive < joined {
		t.Fatalf("%d partitions changed primary, fewer than the %d the new member took", naive, joined)
	}
	for _, tc := range []struct {
		name     string
		old, new *Ring
		want     int
	}{
		{"same ring", three, three, 0},
		{"join", three, four, naive},
		{"leave is symmetric", four, three, naive},
		{"from empty", empty, three, cfg.PartitionCount},
		{"to nil", three, nil, cfg.PartitionCount},
		{"both empty", nil, empty, 0},
		{"different partition counts", three, small, cfg.PartitionCount},
	} {
		if got := Moved(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: Moved = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestConcurrentLookupsAreSafe(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.ReplicationFactor = 2
	r := mustNew(t, testMembers("node-", 4), 1, cfg)
	want := ownerIDs(r.Owners("ns", testID("k"), 2))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if got := ownerIDs(r.Owners("ns", testID("k"), 2)); !slices.Equal(got, want) {
					t.Errorf("concurrent Owners = %v, want %v", got, want)
					return
				}
				_ = r.Members()
				_ = r.LoadDistribution()
			}
		})
	}
	wg.Wait()
}
