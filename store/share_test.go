package store

import (
	"errors"
	"testing"
)

// shareSpecs returns n chunks of 1000 bytes (1024-byte slots) numbered from
// first.
func shareSpecs(first, n int) []*chunkSpec {
	out := make([]*chunkSpec, n)
	for i := range out {
		out[i] = newSpec(uint64(first+i), 1000)
	}
	return out
}

func putAll(t *testing.T, s *Store, ns string, cs []*chunkSpec) {
	t.Helper()
	for _, c := range cs {
		mustPut(t, s, ns, c.id, c.data)
	}
}

// held returns which of cs namespace ns holds.
func held(s *Store, ns string, cs []*chunkSpec) []bool {
	out := make([]bool, len(cs))
	for i, c := range cs {
		out[i] = s.Contains(ns, c.id)
	}
	return out
}

func count(b []bool) (n int) {
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}

func mustShare(t *testing.T, s *Store, ns string, sh Share) {
	t.Helper()
	if err := s.SetShare(ns, sh); err != nil {
		t.Fatalf("SetShare(%s): %v", ns, err)
	}
}

// TestShareGuaranteeIsNeverEvictedForAnotherNamespace: a namespace holding
// no more than its guarantee keeps every chunk however much another
// namespace writes; without the share the same writes evict all of them.
func TestShareGuaranteeIsNeverEvictedForAnotherNamespace(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{false, true} {
		s := lruStore(t, 10)
		if shared {
			mustShare(t, s, "a", Share{Guarantee: Amount{Percent: 40}})
		}
		a := shareSpecs(0, 4)
		putAll(t, s, "a", a)
		putAll(t, s, "b", shareSpecs(100, 100))
		got := count(held(s, "a", a))
		switch {
		case shared && got != 4:
			t.Fatalf("with a 40 %% guarantee: a holds %d of its 4 chunks after b's burst, want 4", got)
		case !shared && got != 0:
			t.Fatalf("without shares: a holds %d of its 4 chunks after b's burst, want 0 (one LRU)", got)
		}
		st := s.NamespaceStats()
		if shared && (st["a"].Evictions != 0 || st["b"].Evictions != 94 || st["b"].Chunks != 6) {
			t.Fatalf("stats a %+v b %+v: want no eviction of a, 94 of b, b holding 6", st["a"], st["b"])
		}
	}
}

// TestShareEvictsFromNamespacesOverTheirShareFirst: another namespace's
// write takes a namespace's chunks above its guarantee, oldest first, and
// stops at the guarantee; the rest comes from the writer's own chunks.
func TestShareEvictsFromNamespacesOverTheirShareFirst(t *testing.T) {
	t.Parallel()
	s := lruStore(t, 10)
	mustShare(t, s, "a", Share{Guarantee: Amount{Bytes: 4 * 1024}})
	a, b := shareSpecs(0, 7), shareSpecs(100, 8)
	putAll(t, s, "a", a)
	putAll(t, s, "b", b)
	wantA := []bool{false, false, false, true, true, true, true}
	wantB := []bool{false, false, true, true, true, true, true, true}
	for i, w := range wantA {
		if got := s.Contains("a", a[i].id); got != w {
			t.Errorf("a[%d] held %v, want %v", i, got, w)
		}
	}
	for i, w := range wantB {
		if got := s.Contains("b", b[i].id); got != w {
			t.Errorf("b[%d] held %v, want %v", i, got, w)
		}
	}
}

// TestShareCapEvictsOnlyItsOwnChunks: a namespace at its cap makes room
// for its writes from its own oldest chunks, even with the budget free,
// and never takes another namespace's.
func TestShareCapEvictsOnlyItsOwnChunks(t *testing.T) {
	t.Parallel()
	s := lruStore(t, 10)
	mustShare(t, s, "a", Share{Cap: Amount{Percent: 30}})
	b := shareSpecs(100, 5)
	putAll(t, s, "b", b)
	a := shareSpecs(0, 10)
	putAll(t, s, "a", a)
	if got := held(s, "a", a); count(got) != 3 || !got[7] || !got[8] || !got[9] {
		t.Fatalf("a holds %v, want its newest 3 (cap 30 %% of 10 slots)", got)
	}
	if got := count(held(s, "b", b)); got != 5 {
		t.Fatalf("b holds %d of 5 chunks, want all: a's writes must evict only a's chunks", got)
	}
	st := s.NamespaceStats()["a"]
	if st.Chunks != 3 || st.Bytes != 3*1024 || st.Evictions != 7 || st.CapBytes != 3072 {
		t.Fatalf("a's stats %+v: want 3 chunks, 3072 bytes, 7 evictions, cap 3072", st)
	}
}

// TestShareCapRefusesAChunkThatCannotFit: a chunk larger than its
// namespace's cap, or one for which pinned chunks of its own leave no
// room under the cap, is rejected.
func TestShareCapRefusesAChunkThatCannotFit(t *testing.T) {
	t.Parallel()
	s := lruStore(t, 10)
	mustShare(t, s, "a", Share{Cap: Amount{Bytes: 2048}})
	a := shareSpecs(0, 3)
	putAll(t, s, "a", a[:2])
	n, pin, err := s.lookup("a", []ID{a[0].id, a[1].id}, 60e9)
	if err != nil || n != 2 {
		t.Fatalf("pinning lookup: %d, %v", n, err)
	}
	if err := s.put("a", a[2].id, a[2].data, Checksum(a[2].data)); !errors.Is(err, ErrRejected) {
		t.Fatalf("put over the cap with its own chunks pinned: %v, want ErrRejected", err)
	}
	s.Release(pin)
	mustPut(t, s, "a", a[2].id, a[2].data)
	big := newSpec(50, 3000)
	if err := s.put("a", big.id, big.data, Checksum(big.data)); !errors.Is(err, ErrRejected) {
		t.Fatalf("a 4 KiB slot under a 2 KiB cap: %v, want ErrRejected", err)
	}
}

// TestSharesAreChecked: shares that cannot be kept are refused.
func TestSharesAreChecked(t *testing.T) {
	t.Parallel()
	s := lruStore(t, 10)
	mustShare(t, s, "a", Share{Guarantee: Amount{Percent: 60}})
	for name, sh := range map[string]Share{
		"guarantees over 100 %":   {Guarantee: Amount{Percent: 50}},
		"guarantee above the cap": {Guarantee: Amount{Percent: 20}, Cap: Amount{Percent: 10}},
		"percent over 100":        {Cap: Amount{Percent: 101}},
		"negative bytes":          {Cap: Amount{Bytes: -1}},
		"bytes and percent":       {Cap: Amount{Bytes: 1, Percent: 1}},
	} {
		if err := s.SetShare("b", sh); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	mustShare(t, s, "a", Share{})
	mustShare(t, s, "b", Share{Guarantee: Amount{Percent: 50}})
	if got := s.Shares(); len(got) != 1 || got["b"].Guarantee.Percent != 50 {
		t.Fatalf("Shares() = %v, want only b's", got)
	}
	cfg := testConfig(t, 10*1024)
	cfg.Policy = PolicyTinyLFU
	tl := openTest(t, cfg)
	if err := tl.SetShare("a", Share{Cap: Amount{Percent: 10}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a share under tinylfu: %v, want ErrInvalid", err)
	}
}

// TestSharesOffAgainIsOneLRU: clearing the last share goes back to one
// LRU over every chunk.
func TestSharesOffAgainIsOneLRU(t *testing.T) {
	t.Parallel()
	s := lruStore(t, 10)
	mustShare(t, s, "a", Share{Guarantee: Amount{Percent: 40}})
	a := shareSpecs(0, 4)
	putAll(t, s, "a", a)
	mustShare(t, s, "a", Share{})
	putAll(t, s, "b", shareSpecs(100, 10))
	if got := count(held(s, "a", a)); got != 0 {
		t.Fatalf("a holds %d chunks after its share was removed and b wrote the whole budget, want 0", got)
	}
}

// TestSharesSurviveARestart: a share is kept in the catalog and in force
// after the next Open.
func TestSharesSurviveARestart(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 10*classSize(1000))
	cfg.Policy = PolicyLRU
	s := openTest(t, cfg)
	mustShare(t, s, "a", Share{Guarantee: Amount{Percent: 40}, Cap: Amount{Bytes: 8192}})
	a := shareSpecs(0, 4)
	putAll(t, s, "a", a)
	s = reopen(t, s, cfg)
	if got := s.Shares()["a"]; got.Guarantee.Percent != 40 || got.Cap.Bytes != 8192 {
		t.Fatalf("share after restart: %+v", got)
	}
	putAll(t, s, "b", shareSpecs(100, 30))
	if got := count(held(s, "a", a)); got != 4 {
		t.Fatalf("a holds %d of 4 chunks after restart and b's burst, want 4", got)
	}
}

// TestNamespaceStatsCountLookups: hits and misses are the ids lookups
// asked about, by namespace.
func TestNamespaceStatsCountLookups(t *testing.T) {
	t.Parallel()
	s := lruStore(t, 10)
	a := shareSpecs(0, 3)
	putAll(t, s, "a", a[:2])
	if _, _, err := s.Has("a", []ID{a[0].id, a[1].id, a[2].id}, 0); err != nil {
		t.Fatal(err)
	}
	if st := s.NamespaceStats()["a"]; st.Hits != 2 || st.Misses != 1 || st.Chunks != 2 || st.Bytes != 2048 {
		t.Fatalf("a's stats %+v: want 2 hits, 1 miss, 2 chunks of 1024-byte slots", st)
	}
}
