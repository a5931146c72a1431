package trace

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestLRUHandWrittenSequence(t *testing.T) {
	t.Parallel()
	c := NewLRU(2)
	for i, step := range []struct {
		id  int64
		hit bool
	}{
		{1, false}, // [1]
		{2, false}, // [2 1]
		{1, true},  // [1 2]
		{3, false}, // [3 1], evicts 2
		{2, false}, // [2 3], evicts 1
		{3, true},  // [3 2]
		{1, false}, // [1 3], evicts 2
		{3, true},  // [3 1]
		{1, true},  // [1 3]
	} {
		if got := c.Access(step.id); got != step.hit {
			t.Fatalf("step %d: Access(%d) = %v, want %v", i, step.id, got, step.hit)
		}
	}
	if c.Len() != 2 {
		t.Errorf("Len = %d, want 2", c.Len())
	}
}

func TestLRUWithZeroCapacityNeverHits(t *testing.T) {
	t.Parallel()
	for _, capacity := range []int{0, -1} {
		c := NewLRU(capacity)
		for range 3 {
			if c.Access(7) {
				t.Fatalf("capacity %d: hit", capacity)
			}
		}
	}
}

// naiveLRU is the reference: a slice, most recently used last.
type naiveLRU struct {
	capacity int
	ids      []int64
}

func (n *naiveLRU) Access(id int64) bool {
	i := slices.Index(n.ids, id)
	if i >= 0 {
		n.ids = append(slices.Delete(n.ids, i, i+1), id)
		return true
	}
	if n.capacity <= 0 {
		return false
	}
	if len(n.ids) == n.capacity {
		n.ids = n.ids[1:]
	}
	n.ids = append(n.ids, id)
	return false
}

func TestLRUAgreesWithNaiveReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		capacity := rng.IntN(8)
		fast, slow := NewLRU(capacity), &naiveLRU{capacity: capacity}
		for step := range 300 {
			id := int64(rng.IntN(12))
			if got, want := fast.Access(id), slow.Access(id); got != want {
				t.Fatalf("trial %d step %d capacity %d: Access(%d) = %v, want %v", trial, step, capacity, id, got, want)
			}
		}
	}
}

func TestReplayCountsEveryBlockInOrder(t *testing.T) {
	t.Parallel()
	reqs := []Request{
		{InputLength: 1024, HashIDs: []int64{1, 2}},
		{InputLength: 1536, HashIDs: []int64{1, 2, 3}},
		{InputLength: 100, HashIDs: []int64{4}},
		{InputLength: 1024, HashIDs: []int64{1, 5}},
	}
	// Capacity 2: 1 2 | 1h 2h 3(evicts 1) | 4(evicts 2) | 1 5.
	if hits, total := Replay(reqs, NewLRU(2)); hits != 2 || total != 8 {
		t.Errorf("Replay = %d/%d, want 2/8", hits, total)
	}
	if hits, total := Replay(reqs, NewLRU(100)); hits != 3 || total != 8 {
		t.Errorf("Replay unbounded = %d/%d, want 3/8", hits, total)
	}
}

func BenchmarkLRUSyntheticTrace(b *testing.B) {
	reqs, err := syntheticTrace()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		Replay(reqs, NewLRU(4392))
	}
}
