package fairshare

import (
	"errors"
	"testing"
)

// TestAPoolChecksItsTotalAndEachShare: a client alone takes up to the
// reserve (three quarters), a second one its even share; nothing passes
// the total, and what is given back can be taken again.
func TestAPoolChecksItsTotalAndEachShare(t *testing.T) {
	p := NewPool(100)
	if err := p.Take("a", 75); err != nil {
		t.Fatalf("a client alone takes three quarters: %v", err)
	}
	if err := p.Take("a", 1); err == nil || errors.Is(err, ErrFull) {
		t.Fatalf("past its share a client is refused by the share, got %v", err)
	}
	if err := p.Take("b", 26); !errors.Is(err, ErrFull) {
		t.Fatalf("past the total: %v, want ErrFull", err)
	}
	if err := p.Take("b", 25); err != nil || p.InUse() != 100 {
		t.Fatalf("a second client's room: %v, in use %d", err, p.InUse())
	}
	p.Give("a", 75)
	if p.InUse() != 25 {
		t.Fatalf("in use after a give: %d", p.InUse())
	}
}
