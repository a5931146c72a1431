package fairshare

import "testing"

// TestALoneClientUsesMostAndASecondIsNeverBlocked: one client takes what it
// can; it gets total−Reserve, and a second one still finds Reserve free.
func TestALoneClientUsesMostAndASecondIsNeverBlocked(t *testing.T) {
	l := New(128, 0)
	inUse := int64(0)
	for l.Take("a", 1, inUse) == nil {
		inUse++
	}
	if inUse != 96 {
		t.Fatalf("a lone client took %d of 128, want 96 (all but the reserve of 32)", inUse)
	}
	for range 32 {
		if err := l.Take("b", 1, inUse); err != nil {
			t.Fatalf("the second client was refused with %d of 128 in use: %v", inUse, err)
		}
		inUse++
	}
	if err := l.Take("a", 1, inUse-1); err == nil {
		t.Fatal("the first client, over its share, took more once the second one was active")
	}
}

// TestSharesEvenOutAsHoldingsEnd: a client over its share takes nothing
// until it is back within max(share, what keeps the reserve free).
func TestSharesEvenOutAsHoldingsEnd(t *testing.T) {
	l := New(120, 0) // reserve 30
	mustTake(t, l, "a", 90, 0)
	mustTake(t, l, "b", 10, 90)
	// Two active: a share is 120/3 = 40; spare for a is 120-30-100+90 = 80.
	if got := l.Limit("a", 100); got != 80 {
		t.Fatalf("limit of a = %d, want 80", got)
	}
	l.Give("a", 60) // a holds 30
	mustTake(t, l, "a", 10, 40)
	if got := l.Clients(); got != 2 {
		t.Fatalf("%d clients, want 2", got)
	}
	l.Give("b", 10)
	if got := l.Clients(); got != 1 || l.Used("b") != 0 {
		t.Fatalf("a client that gave all back is still counted: %d clients, b holds %d", got, l.Used("b"))
	}
}

// TestManyClientsEachGetAShare: with many clients, each can hold at least an
// even share among them and a newcomer, whatever the others do.
func TestManyClientsEachGetAShare(t *testing.T) {
	l := New(1000, 0)
	inUse := int64(0)
	for i, c := range []string{"a", "b", "c"} {
		share := l.Limit(c, inUse)
		if want := int64(1000 / (i + 2)); share < want {
			t.Fatalf("client %s's limit is %d, want at least %d", c, share, want)
		}
		mustTake(t, l, c, 1000/int64(i+3), inUse)
		inUse += 1000 / int64(i+3)
	}
}

func mustTake(t *testing.T, l *Ledger, c string, n, inUse int64) {
	t.Helper()
	if err := l.Take(c, n, inUse); err != nil {
		t.Fatal(err)
	}
}
