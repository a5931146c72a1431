package store

import (
	"errors"
	"testing"
	"time"
)

// TestAStalledWriterCannotTakeAnotherClientsStaging: a client that stages
// chunks and sends no bytes used to take the whole staged-bytes budget, and
// every other client's stage was ErrNoSpace. Now it stops at its share, and
// a second client still stages.
func TestAStalledWriterCannotTakeAnotherClientsStaging(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 1<<20)
	cfg.MaxStagedBytes = 64 << 10
	s := openTest(t, cfg)
	var hoard []*Staged
	for i := range 64 {
		w, err := s.StageFor("attacker", "ns", testID(uint64(i)), 4<<10, 0)
		if errors.Is(err, ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hoard = append(hoard, w)
	}
	if got := len(hoard); got != 12 { // 48 KiB: all but the reserve of a quarter
		t.Fatalf("a lone client staged %d chunks of 4 KiB in a 64 KiB budget, want 12", got)
	}
	for i := range 4 {
		if _, err := s.StageFor("victim", "ns", testID(uint64(100+i)), 4<<10, 0); err != nil {
			t.Fatalf("the victim's stage %d was refused: %v", i, err)
		}
	}
	if staged, _ := s.ClientShares("attacker"); staged != 48<<10 {
		t.Fatalf("the attacker's share reads %d, want %d", staged, 48<<10)
	}
	for _, w := range hoard {
		w.Abort()
	}
	if staged, _ := s.ClientShares("attacker"); staged != 0 {
		t.Fatalf("after its aborts the attacker still holds %d staged bytes", staged)
	}
}

// TestAPinHoarderCannotFreezeOtherClientsPins: one client holding the
// pinned-bytes budget with leases made every other client's pins fail
// (ErrPinLimit: lookups counted 0 held). Now it is held to its share.
func TestAPinHoarderCannotFreezeOtherClientsPins(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 1<<20)
	cfg.MaxPinnedBytes = 64 << 10
	s := openTest(t, cfg)
	var ids []ID
	for i := range 40 {
		c := newSpec(uint64(i), 4<<10)
		mustPut(t, s, "ns", c.id, c.data)
		ids = append(ids, c.id)
	}
	pinned := 0
	for _, id := range ids[:32] {
		if _, _, err := s.HasFor("hoarder", "ns", []ID{id}, time.Minute); err != nil {
			if !errors.Is(err, ErrPinLimit) {
				t.Fatal(err)
			}
			break
		}
		pinned++
	}
	if pinned != 12 {
		t.Fatalf("a lone client pinned %d chunks of 4 KiB in a 64 KiB budget, want 12", pinned)
	}
	held, pin, err := s.HasFor("victim", "ns", ids[32:36], time.Minute)
	if err != nil || pin == 0 {
		t.Fatalf("the victim's pins were refused (pin %d): %v", pin, err)
	}
	for i, h := range held {
		if !h {
			t.Fatalf("chunk %d not held", i)
		}
	}
}

// TestPinsCannotBeRenewedForever: a client that renews its leases on a
// chunk before they end keeps it pinned for MaxPinHold at most; then its
// new leases answer the chunk held and do not pin it, until its earlier
// leases end. Another client pins it as usual.
func TestPinsCannotBeRenewedForever(t *testing.T) {
	t.Parallel()
	cfg, clk := clockConfig(t, 1<<20)
	cfg.MaxPinLease = time.Minute
	cfg.MaxPinHold = 3 * time.Minute
	s := openTest(t, cfg)
	c := newSpec(1, 4<<10)
	mustPut(t, s, "ns", c.id, c.data)
	renew := func(client string) PinID {
		t.Helper()
		held, pin, err := s.HasFor(client, "ns", []ID{c.id}, time.Minute)
		if err != nil || !held[0] {
			t.Fatalf("held %v: %v", held, err)
		}
		return pin
	}
	for range 6 { // every 30 s for 3 minutes: each lease overlaps the next
		if renew("hoarder") == 0 {
			t.Fatalf("a renewal within the hold bound pinned nothing at %v", clk.Now())
		}
		clk.Advance(30 * time.Second)
		s.ExpireNow()
	}
	if pin := renew("hoarder"); pin != 0 {
		t.Fatal("a client kept renewing its pin of a chunk past MaxPinHold")
	}
	if renew("other") == 0 {
		t.Fatal("another client could not pin the chunk")
	}
	clk.Advance(time.Minute + time.Second) // the hoarder's last leases end
	s.ExpireNow()
	if renew("hoarder") == 0 {
		t.Fatal("after a break the client could not pin the chunk again")
	}
}
