package store

import (
	"errors"
	"testing"
)

// TestStagedBytesAreCapped: writes in progress may hold at most
// MaxStagedBytes (default half the limit); one more is refused with
// ErrNoSpace and counted, sealed chunks stay, and once a staged write ends
// the room is there again. Staging reports what is in progress.
func TestStagedBytesAreCapped(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 1<<20)
	cfg.MaxStagedBytes = 0 // the default: half the limit
	s := openTest(t, cfg)
	sealed := newSpec(1, 64<<10)
	mustPut(t, s, "ns", sealed.id, sealed.data)
	var open []*Staged
	for i := range 8 { // 8 × 64 KiB = 512 KiB = half the limit
		c := newSpec(uint64(10+i), 64<<10)
		w, err := s.Stage("ns", c.id, int64(len(c.data)), Checksum(c.data))
		if err != nil {
			t.Fatalf("stage %d: %v", i, err)
		}
		open = append(open, w)
		if !s.Staging("ns", c.id) {
			t.Fatalf("chunk %d is staged but Staging says no", i)
		}
	}
	extra := newSpec(99, 64<<10)
	before := s.Stats().Rejections[ReasonNoSpace]
	if _, err := s.Stage("ns", extra.id, int64(len(extra.data)), Checksum(extra.data)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("a stage past the cap: %v, want ErrNoSpace", err)
	}
	if got := s.Stats().Rejections[ReasonNoSpace]; got != before+1 {
		t.Fatalf("no_space rejections %d, want %d", got, before+1)
	}
	if !s.Contains("ns", sealed.id) {
		t.Fatal("the sealed chunk was pushed out for reservations")
	}
	open[0].Abort()
	if s.Staging("ns", newSpec(10, 64<<10).id) {
		t.Fatal("an aborted write still reports staging")
	}
	w, err := s.Stage("ns", extra.id, int64(len(extra.data)), Checksum(extra.data))
	if err != nil {
		t.Fatalf("a stage after one ended: %v", err)
	}
	w.Abort()
	for _, w := range open[1:] {
		w.Abort()
	}
}
