package transfer

import "testing"

// TestUnclearedPoolSizesAndReuse: Get returns a buffer of the length asked
// for in the smallest power-of-two class that fits, Put takes back only its
// own classes, and a buffer is handed out again without being cleared (the
// point of the pool: frames overwrite it whole).
func TestUnclearedPoolSizesAndReuse(t *testing.T) {
	p := newUnclearedPool()
	for _, tt := range []struct{ n, cap int }{{1, 4 << 10}, {4 << 10, 4 << 10}, {4<<10 + 1, 8 << 10}, {1<<20 + 20, 2 << 20}, {8 << 20, 8 << 20}} {
		b := p.Get(tt.n)
		if len(*b) != tt.n || cap(*b) != tt.cap {
			t.Fatalf("Get(%d): len %d cap %d, want cap %d", tt.n, len(*b), cap(*b), tt.cap)
		}
		p.Put(b)
	}
	if b := p.Get(9 << 20); len(*b) != 9<<20 {
		t.Fatalf("Get beyond the classes: len %d", len(*b))
	}
	b := p.Get(100)
	(*b)[0] = 0xAB
	p.Put(b)
	again := p.Get(200)
	if again == b && (*again)[0] != 0xAB {
		t.Fatal("a reused buffer was cleared")
	}
	odd := make([]byte, 10, 5000)
	p.Put(&odd) // not a class size: dropped, not pooled
}
