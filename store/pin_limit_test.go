package store

import (
	"testing"
	"time"
)

// pinChunks pins the chunks of namespace "ns" with one lease and fails
// unless every one is held.
func pinChunks(t *testing.T, s *Store, cs ...*chunkSpec) PinID {
	t.Helper()
	ids := make([]ID, len(cs))
	for i, c := range cs {
		ids[i] = c.id
	}
	held, pin, err := s.Has("ns", ids, time.Minute)
	if err != nil {
		t.Fatalf("Has: %v", err)
	}
	for i, h := range held {
		if !h {
			t.Fatalf("chunk %v is not held", cs[i])
		}
	}
	return pin
}

// LRU evicts the oldest chunk that is not pinned: a pinned chunk is neither
// evicted nor counted as evicted, and the room the policy makes is real, so
// the new writes succeed.
func TestLRUSkipsPinnedVictimsAndCountsOnlyRealEvictions(t *testing.T) {
	t.Parallel()
	s := lruStore(t, 4)
	c := make([]*chunkSpec, 7)
	for i := range c {
		c[i] = newSpec(uint64(i), 1000)
	}
	for _, x := range c[:4] {
		mustPut(t, s, "ns", x.id, x.data)
	}
	pin := pinChunks(t, s, c[0], c[1])
	// Reads make c2 and c3 the newest: the pinned c0 and c1 are the oldest.
	mustRead(t, s, c[2])
	mustRead(t, s, c[3])
	mustPut(t, s, "ns", c[4].id, c[4].data)
	mustPut(t, s, "ns", c[5].id, c[5].data)
	for i, want := range []bool{true, true, false, false, true, true} {
		if got := s.Contains("ns", c[i].id); got != want {
			t.Errorf("chunk %d held = %v, want %v", i, got, want)
		}
		if evictedWhilePinned(s, "ns", c[i].id) {
			t.Errorf("chunk %d is pinned and was evicted", i)
		}
	}
	if st := s.Stats(); st.Evictions[ReasonPolicy] != 2 {
		t.Fatalf("evictions %v, want the 2 unpinned chunks", st.Evictions)
	}
	// Once the pins end the chunks are ordinary again: the oldest goes first.
	s.Release(pin)
	mustPut(t, s, "ns", c[6].id, c[6].data)
	if s.Contains("ns", c[0].id) || !s.Contains("ns", c[1].id) {
		t.Fatalf("after the pins ended, c0 held = %v, c1 held = %v; want the oldest (c0) evicted",
			s.Contains("ns", c[0].id), s.Contains("ns", c[1].id))
	}
	quiescentCheck(t, s, "ns", c)
}

// When every chunk is pinned the policy evicts nothing: the write is refused
// for lack of space and no pinned chunk is marked evicted.
func TestLRUWithEverythingPinnedRefusesTheWriteAndEvictsNothing(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 4*classSize(1000))
	cfg.MaxPinnedBytes = cfg.MemoryLimit
	s := openTest(t, cfg)
	c := make([]*chunkSpec, 5)
	for i := range c {
		c[i] = newSpec(uint64(i), 1000)
	}
	for _, x := range c[:4] {
		mustPut(t, s, "ns", x.id, x.data)
	}
	pin := pinChunks(t, s, c[:4]...)
	err := s.put("ns", c[4].id, c[4].data, Checksum(c[4].data))
	wantErr(t, err, ErrNoSpace)
	for i := range 4 {
		if !s.Contains("ns", c[i].id) || evictedWhilePinned(s, "ns", c[i].id) {
			t.Fatalf("pinned chunk %d: held %v, evicted %v", i, s.Contains("ns", c[i].id), evictedWhilePinned(s, "ns", c[i].id))
		}
	}
	if st := s.Stats(); st.Evictions[ReasonPolicy] != 0 || st.Rejections[ReasonNoSpace] != 1 {
		t.Fatalf("evictions %v rejections %v, want none and one for no space", st.Evictions, st.Rejections)
	}
	s.Release(pin)
	mustPut(t, s, "ns", c[4].id, c[4].data)
	quiescentCheck(t, s, "ns", c)
}

// Pins may hold at most Config.MaxPinnedBytes of slots (default half the
// memory limit): a lease that would pin more is refused with ErrPinLimit and
// pins nothing.
func TestPinsBeyondThePinLimitAreRefused(t *testing.T) {
	t.Parallel()
	s := lruStore(t, 4) // default pin limit: 2 slots
	c := make([]*chunkSpec, 4)
	for i := range c {
		c[i] = newSpec(uint64(i), 1000)
		mustPut(t, s, "ns", c[i].id, c[i].data)
	}
	pin := pinChunks(t, s, c[0], c[1])
	// Pinning an already pinned chunk again costs nothing more.
	again := pinChunks(t, s, c[1])
	_, p, err := s.Has("ns", []ID{c[2].id, c[3].id}, time.Minute)
	wantErr(t, err, ErrPinLimit)
	if p != 0 {
		t.Fatalf("refused lease returned pin %d", p)
	}
	st := s.Stats()
	if st.PinnedChunks != 2 || st.PinnedBytes != 2*classSize(1000) || st.PinLimitBytes != 2*classSize(1000) {
		t.Fatalf("PinnedChunks %d PinnedBytes %d PinLimitBytes %d after a refused lease, want 2, %d, %d",
			st.PinnedChunks, st.PinnedBytes, st.PinLimitBytes, 2*classSize(1000), 2*classSize(1000))
	}
	// Without a pin, Has still answers.
	if held, _, err := s.Has("ns", []ID{c[2].id, c[3].id}, 0); err != nil || !held[0] || !held[1] {
		t.Fatalf("Has without a pin: %v, %v", held, err)
	}
	s.Release(pin)
	s.Release(again)
	pinChunks(t, s, c[2], c[3])
	if st := s.Stats(); st.PinnedBytes != 2*classSize(1000) {
		t.Fatalf("PinnedBytes = %d, want %d", st.PinnedBytes, 2*classSize(1000))
	}
}

func TestPinLimitMustFitTheMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, v := range []int64{-1, 1<<20 + 1} {
		cfg := testConfig(t, 1<<20)
		cfg.MaxPinnedBytes = v
		_, err := Open(cfg)
		wantErr(t, err, ErrInvalid, "MaxPinnedBytes")
	}
	cfg := testConfig(t, 1<<20)
	if got := openTest(t, cfg).Stats().PinLimitBytes; got != 1<<19 {
		t.Fatalf("default pin limit = %d, want half of %d", got, 1<<20)
	}
}
