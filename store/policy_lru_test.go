package store

import (
	"bytes"
	"errors"
	"testing"
)

// lruStore opens a store whose budget holds exactly n chunks of 1000 bytes
// (1024-byte slots) under PolicyLRU.
func lruStore(t *testing.T, n int) *Store {
	t.Helper()
	cfg := testConfig(t, int64(n)*classSize(1000))
	cfg.Policy = PolicyLRU
	return openTest(t, cfg)
}

func TestLRUEvictsTheLeastRecentlyUsedChunk(t *testing.T) {
	t.Parallel()
	s := lruStore(t, 4)
	c := make([]*chunkSpec, 6)
	for i := range c {
		c[i] = newSpec(uint64(i), 1000)
	}
	for _, x := range c[:4] {
		mustPut(t, s, "ns", x.id, x.data)
	}
	// A read and a lookup make c0 and c1 the newest; c2 is now the oldest.
	mustRead(t, s, c[0])
	if n, _, err := s.lookup("ns", []ID{c[1].id}, 0); err != nil || n != 1 {
		t.Fatalf("Lookup: %d, %v", n, err)
	}
	mustPut(t, s, "ns", c[4].id, c[4].data)
	mustPut(t, s, "ns", c[5].id, c[5].data)
	for i, want := range []bool{true, true, false, false, true, true} {
		if got := s.Contains("ns", c[i].id); got != want {
			t.Errorf("chunk %d held = %v, want %v", i, got, want)
		}
	}
	st := s.Stats()
	if st.Evictions[ReasonPolicy] != 2 || st.Rejections[ReasonPolicy] != 0 {
		t.Fatalf("evictions %v rejections %v, want 2 policy evictions and no rejection", st.Evictions, st.Rejections)
	}
	quiescentCheck(t, s, "ns", c)
}

func TestLRUAdmitsEveryChunkThatFits(t *testing.T) {
	t.Parallel()
	s := lruStore(t, 8)
	// Many cold newcomers after popular chunks: LRU refuses none of them
	// (TinyLFU would), and the newest eight are held.
	var all []*chunkSpec
	for i := range 100 {
		c := newSpec(uint64(i), 1000)
		all = append(all, c)
		if err := s.put("ns", c.id, c.data, Checksum(c.data)); err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
		if i < 8 {
			for range 20 {
				mustRead(t, s, c)
			}
		}
	}
	for i, c := range all {
		if got, want := s.Contains("ns", c.id), i >= 92; got != want {
			t.Errorf("chunk %d held = %v, want %v", i, got, want)
		}
	}
	quiescentCheck(t, s, "ns", all)
}

func TestLRURejectsAChunkLargerThanTheBudgetOnlyAtStage(t *testing.T) {
	t.Parallel()
	s := lruStore(t, 2)
	big := newSpec(1, 3000)
	err := s.put("ns", big.id, big.data, Checksum(big.data))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Put of a chunk above the budget: %v, want ErrInvalid", err)
	}
}

func TestUnknownPolicyIsAnError(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 1<<20)
	cfg.Policy = "fifo"
	_, err := Open(cfg)
	wantErr(t, err, ErrInvalid, `"fifo"`, PolicyLRU, PolicyTinyLFU)
}

// mustRead reads c from namespace "ns" and checks its bytes.
func mustRead(t *testing.T, s *Store, c *chunkSpec) {
	t.Helper()
	v, err := s.Get("ns", c.id)
	if err != nil {
		t.Fatalf("Get %v: %v", c, err)
	}
	defer v.Release()
	if !bytes.Equal(v.Bytes(), c.data) {
		t.Fatalf("Get %v: other bytes", c)
	}
}

// A victim the store refuses to evict (it was pinned after LRU chose it)
// is put back with its cost counted; one forgotten meanwhile (the store
// dropped it) is not.
func TestLRUPutsBackAVictimTheStoreRefuses(t *testing.T) {
	t.Parallel()
	var l *lru
	entries := make([]*entry, 5)
	for i := range entries {
		entries[i] = &entry{hash: uint64(i + 1)}
	}
	refuse := map[*entry]bool{entries[0]: true, entries[1]: true}
	forgetFirst := map[*entry]bool{entries[1]: true}
	var evicted []*entry
	l = newLRU(3000, func(e *entry, force bool) bool {
		if force {
			t.Fatal("LRU forced an eviction")
		}
		if forgetFirst[e] {
			l.forget(e.hash) // dropped by the store while being evicted
		}
		if refuse[e] {
			return false
		}
		evicted = append(evicted, e)
		return true
	}, func(*entry) { t.Fatal("LRU rejected a chunk that fits") })
	for _, e := range entries[:3] {
		l.offer(e, 1000)
	}
	l.offer(entries[3], 1000) // victim e0: refused, put back as the newest
	if l.items[entries[0].hash] == nil || l.used != 4000 || len(evicted) != 0 {
		t.Fatalf("after a refused eviction: e0 held %v, used %d, evicted %d; want e0 held, 4000, none",
			l.items[entries[0].hash] != nil, l.used, len(evicted))
	}
	l.offer(entries[4], 1000) // victims e1 (forgotten, refused) and e2
	if l.items[entries[1].hash] != nil {
		t.Fatal("a victim forgotten during its eviction was put back")
	}
	if l.used != 3000 || len(evicted) != 1 || evicted[0] != entries[2] {
		t.Fatalf("used %d, evicted %d; want 3000 and e2", l.used, len(evicted))
	}
	var n int
	var sum int64
	for it := l.head.next; it != &l.head; it = it.next {
		n++
		sum += it.cost
	}
	if n != len(l.items) || sum != l.used {
		t.Fatalf("list holds %d items costing %d; map %d, used %d", n, sum, len(l.items), l.used)
	}
}
