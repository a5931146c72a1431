package store

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// Conformance tests: each proves one promise of the Store's contract.

func TestPutThenGetReturnsExactBytes(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 64<<20))
	var universe []*chunkSpec
	for i, size := range []int{1, 63, 64, 65, 4095, 4097, 300 << 10, 1<<20 + 3} {
		c := newSpec(uint64(i), size)
		mustPut(t, s, "ns", c.id, c.data)
		universe = append(universe, c)
	}
	for _, c := range universe {
		readBack(t, s, "ns", c.id, c.data)
		v, err := s.Get("ns", c.id)
		if err != nil {
			t.Fatal(err)
		}
		if v.Checksum() != Checksum(c.data) || v.Location().Size != int64(c.size) {
			t.Fatalf("%v: View reports checksum %08x size %d", c, v.Checksum(), v.Location().Size)
		}
		v.Release()
	}
	if got := quiescentCheck(t, s, "ns", universe); len(got) != len(universe) {
		t.Fatalf("%d of %d chunks held", len(got), len(universe))
	}
}

func TestChunksAreSeparatedByNamespace(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	a, b := newSpec(1, 1000), newSpec(2, 1000)
	mustPut(t, s, "tenant-a", a.id, a.data)
	mustPut(t, s, "tenant-b", a.id, b.data) // same id, other namespace, other bytes
	readBack(t, s, "tenant-a", a.id, a.data)
	readBack(t, s, "tenant-b", a.id, b.data)
	if s.Contains("tenant-c", a.id) {
		t.Fatal("chunk visible in a namespace it was never put in")
	}
}

func TestStagedWriteInFramesSealsExactBytes(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	for i, frame := range []int{1, 7, 4096, 65 << 10, 1 << 20} {
		c := newSpec(uint64(i), 200<<10+13)
		w := stageWrite(t, s, "ns", c, c.size, frame)
		if w.Size() != int64(c.size) {
			t.Fatalf("Size = %d, want %d", w.Size(), c.size)
		}
		if s.Contains("ns", c.id) {
			t.Fatal("a staged chunk is visible before Seal")
		}
		if _, err := s.Get("ns", c.id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of a staged chunk: %v, want ErrNotFound", err)
		}
		if err := w.Seal(); err != nil {
			t.Fatalf("Seal after frames of %d: %v", frame, err)
		}
		readBack(t, s, "ns", c.id, c.data)
	}
}

func TestStagedDirectBytesSealsExactBytes(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	c := newSpec(1, 123457)
	w, err := s.Stage("ns", c.id, int64(c.size), Checksum(c.data))
	if err != nil {
		t.Fatal(err)
	}
	buf := w.Bytes()
	if len(buf) != c.size {
		t.Fatalf("Bytes has %d bytes, want %d", len(buf), c.size)
	}
	fillPayload(buf, c.id) // the zero-copy writer fills the slot in place
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	readBack(t, s, "ns", c.id, c.data)
}

func TestSecondSealOfSameChunkReportsAlreadyHeldAndChangesNothing(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	c := newSpec(1, 5000)
	w := stageWrite(t, s, "ns", c, c.size, 4096)
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	wantErr(t, w.Seal(), ErrAlreadyHeld, c.id.String())
	// A second writer of the same chunk learns it is held before writing.
	_, err := s.Stage("ns", c.id, int64(c.size), Checksum(c.data))
	wantErr(t, err, ErrAlreadyHeld, c.id.String())
	wantErr(t, s.put("ns", c.id, c.data, Checksum(c.data)), ErrAlreadyHeld)
	after := s.Stats()
	if after.Chunks != before.Chunks || after.UsedBytes != before.UsedBytes || after.StagedChunks != 0 {
		t.Fatalf("a refused second write changed the accounting: %+v -> %+v", before, after)
	}
	readBack(t, s, "ns", c.id, c.data)
}

func TestStageOfChunkBeingStagedReportsBusy(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	c := newSpec(1, 5000)
	const writers = 8
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		winners []*Staged
		busy    int
	)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			w, err := s.Stage("ns", c.id, int64(c.size), Checksum(c.data))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, w)
			case errors.Is(err, ErrBusy):
				busy++
			default:
				t.Errorf("Stage: %v, want success or ErrBusy", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 || busy != writers-1 {
		t.Fatalf("%d writers staged the chunk and %d were told busy; want 1 and %d", len(winners), busy, writers-1)
	}
	if _, err := winners[0].Write(c.data); err != nil {
		t.Fatal(err)
	}
	if err := winners[0].Seal(); err != nil {
		t.Fatal(err)
	}
	readBack(t, s, "ns", c.id, c.data)
}

func TestAbortReturnsBudget(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	c := newSpec(1, 70000)
	w := stageWrite(t, s, "ns", c, 1000, 1000)
	st := s.Stats()
	if st.UsedBytes != classSize(int64(c.size)) || st.StagedChunks != 1 || st.StagedBytes != int64(c.size) {
		t.Fatalf("staged accounting: %+v", st)
	}
	w.Abort()
	w.Abort() // idempotent
	st = s.Stats()
	if st.UsedBytes != 0 || st.StagedChunks != 0 || st.StagedBytes != 0 {
		t.Fatalf("Abort left UsedBytes %d, %d staged chunks", st.UsedBytes, st.StagedChunks)
	}
	if s.Contains("ns", c.id) {
		t.Fatal("aborted chunk is held")
	}
	wantErr(t, w.Seal(), ErrNotStaged)
	// The id is free again.
	mustPut(t, s, "ns", c.id, c.data)
	readBack(t, s, "ns", c.id, c.data)
}

func TestExpiredStageLeaseFreesSlotAndSealReportsLeaseExpired(t *testing.T) {
	t.Parallel()
	cfg, clk := clockConfig(t, 16<<20)
	cfg.StageLease = 10 * time.Second
	s := openTest(t, cfg)
	c := newSpec(1, 9000)
	w := stageWrite(t, s, "ns", c, 4000, 4000)

	clk.Advance(cfg.StageLease - time.Nanosecond)
	if staged, _ := s.ExpireNow(); staged != 0 {
		t.Fatalf("ExpireNow ended %d stages before the lease ran out", staged)
	}
	if _, err := w.Write(c.data[4000:5000]); err != nil {
		t.Fatalf("Write within the lease: %v", err)
	}
	clk.Advance(time.Nanosecond)
	if staged, _ := s.ExpireNow(); staged != 1 {
		t.Fatalf("ExpireNow ended %d stages, want 1", staged)
	}
	st := s.Stats()
	if st.UsedBytes != 0 || st.StagedChunks != 0 || st.StagedBytes != 0 || st.StageExpired != 1 {
		t.Fatalf("after expiry: UsedBytes %d, StagedChunks %d, StagedBytes %d, StageExpired %d",
			st.UsedBytes, st.StagedChunks, st.StagedBytes, st.StageExpired)
	}
	_, err := w.Write(c.data[5000:])
	wantErr(t, err, ErrLeaseExpired)
	wantErr(t, w.Seal(), ErrLeaseExpired, c.id.String())
	if s.Contains("ns", c.id) {
		t.Fatal("a chunk whose lease expired is held")
	}
	// The slot was freed, so a new writer can stage the chunk.
	mustPut(t, s, "ns", c.id, c.data)
	readBack(t, s, "ns", c.id, c.data)
}

func TestSealWithWrongChecksumHoldsNothingAndReturnsBudget(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	for _, direct := range []bool{false, true} {
		c := newSpec(1, 33333)
		w, err := s.Stage("ns", c.id, int64(c.size), Checksum(c.data)^1)
		if err != nil {
			t.Fatal(err)
		}
		if direct {
			copy(w.Bytes(), c.data)
		} else if _, err := w.Write(c.data); err != nil {
			t.Fatal(err)
		}
		wantErr(t, w.Seal(), ErrChecksum, c.id.String())
		if s.Contains("ns", c.id) {
			t.Fatal("a chunk that failed its checksum is held")
		}
		if st := s.Stats(); st.UsedBytes != 0 || st.StagedChunks != 0 || st.Chunks != 0 {
			t.Fatalf("direct=%v: budget not returned: %+v", direct, st)
		}
	}
	stillWorks(t, s)
}

func TestSealOfIncompleteWriteReportsIncomplete(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	c := newSpec(1, 10000)
	w := stageWrite(t, s, "ns", c, 9999, 4096)
	wantErr(t, w.Seal(), ErrIncomplete, "9999 of 10000")
	if s.Contains("ns", c.id) {
		t.Fatal("an incomplete chunk is held")
	}
	if st := s.Stats(); st.UsedBytes != 0 || st.StagedChunks != 0 {
		t.Fatalf("budget not returned: %+v", st)
	}
	stillWorks(t, s)
}

func TestGetOfMissingChunkReportsNotFound(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	id := testID(1)
	_, err := s.Get("ns", id)
	wantErr(t, err, ErrNotFound, id.String())
	wantErr(t, s.evict("ns", id), ErrNotFound, id.String())
	if s.Contains("ns", id) {
		t.Fatal("Contains reports a chunk never stored")
	}
}

func TestCorruptedChunkIsReportedCountedAndDropped(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	c, other := newSpec(1, 20000), newSpec(2, 20000)
	mustPut(t, s, "ns", c.id, c.data)
	mustPut(t, s, "ns", other.id, other.data)
	v, err := s.Get("ns", c.id)
	if err != nil {
		t.Fatal(err)
	}
	loc := v.Location()
	v.Release()

	// Another process on the host scribbles on the chunk through the segment.
	f, mapSize, err := s.segmentFile(loc.Segment)
	if err != nil {
		t.Fatal(err)
	}
	if mapSize != loc.MapSize || loc.Offset+loc.Size+segmentGuard > mapSize {
		t.Fatalf("location %+v does not fit a segment of %d bytes", loc, mapSize)
	}
	if _, err := f.WriteAt([]byte{^c.data[777]}, loc.Offset+777); err != nil {
		t.Fatal(err)
	}
	f.Close()

	before := s.Stats()
	_, err = s.Get("ns", c.id)
	wantErr(t, err, ErrChecksum, c.id.String())
	after := s.Stats()
	if after.ChecksumErrors != before.ChecksumErrors+1 || after.Evictions[ReasonChecksum] != 1 {
		t.Fatalf("checksum error not counted: %d -> %d errors, evictions %v", before.ChecksumErrors, after.ChecksumErrors, after.Evictions)
	}
	if s.Contains("ns", c.id) {
		t.Fatal("a corrupted chunk is still held")
	}
	if _, err := s.Get("ns", c.id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after the drop: %v, want ErrNotFound", err)
	}
	if after.UsedBytes != classSize(int64(other.size)) {
		t.Fatalf("the dropped chunk's slot was not freed: UsedBytes %d", after.UsedBytes)
	}
	readBack(t, s, "ns", other.id, other.data)
	stillWorks(t, s, other)
}

func TestSegmentFileShowsChunkBytesAtLocation(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	c := newSpec(1, 50001)
	mustPut(t, s, "ns", c.id, c.data)
	v, err := s.Get("ns", c.id)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	loc := v.Location()
	f, _, err := s.segmentFile(loc.Segment)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, loc.Size)
	if _, err := f.ReadAt(got, loc.Offset); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, c.data) {
		t.Fatal("segment file does not hold the chunk's bytes at its location")
	}
	if _, _, err := s.segmentFile(loc.Segment + 1000); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SegmentFile of an unknown segment: %v", err)
	}
}

func TestLookupCountsOnlyLeadingHeldChunks(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	a, b, missing, d := newSpec(1, 1000), newSpec(2, 1000), newSpec(3, 1000), newSpec(4, 1000)
	for _, c := range []*chunkSpec{a, b, d} {
		mustPut(t, s, "ns", c.id, c.data)
	}
	cases := []struct {
		ids  []ID
		want int
	}{
		{[]ID{a.id, b.id, missing.id, d.id}, 2},
		{[]ID{missing.id, a.id}, 0},
		{[]ID{a.id, b.id, d.id}, 3},
		{[]ID{d.id}, 1},
		{nil, 0},
	}
	for _, tc := range cases {
		n, pin, err := s.lookup("ns", tc.ids, 0)
		if err != nil || n != tc.want || pin != 0 {
			t.Fatalf("Lookup without lease = (%d, %d, %v), want (%d, 0, nil)", n, pin, err, tc.want)
		}
		n, pin, err = s.lookup("ns", tc.ids, time.Minute)
		if err != nil || n != tc.want || (pin != 0) != (tc.want > 0) {
			t.Fatalf("Lookup with lease = (%d, %d, %v), want %d held", n, pin, err, tc.want)
		}
		if got := s.Stats().PinnedChunks; got != int64(tc.want) {
			t.Fatalf("PinnedChunks = %d, want %d", got, tc.want)
		}
		if pin != 0 && !s.Release(pin) {
			t.Fatal("Release of a live lease reported false")
		}
		if s.Release(pin) {
			t.Fatal("Release of a released lease reported true")
		}
	}
	if n, _, _ := s.lookup("other", []ID{a.id}, 0); n != 0 {
		t.Fatal("Lookup found a chunk in a namespace it is not in")
	}
}

// fillPast puts fresh chunks into s until cond holds, failing after limit
// attempts. Every put must succeed or be refused with ErrRejected or
// ErrNoSpace, and the budget must hold after each.
func fillPast(t *testing.T, s *Store, first uint64, size, limit int, cond func() bool, each func()) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == limit {
			t.Fatalf("condition not reached after %d puts", limit)
		}
		c := newSpec(first+uint64(i), size)
		err := s.put("fill", c.id, c.data, Checksum(c.data))
		if err != nil && !errors.Is(err, ErrRejected) && !errors.Is(err, ErrNoSpace) {
			t.Fatalf("Put: %v", err)
		}
		if st := s.Stats(); st.UsedBytes > st.LimitBytes {
			t.Fatalf("UsedBytes %d over the limit %d", st.UsedBytes, st.LimitBytes)
		}
		each()
	}
}

// pressurePinned puts other chunks into s until the policy has had to
// choose a victim among chunks older than the pinned chunk p many times
// over, checking after each put that p stays readable. With PolicyTinyLFU it
// stops once the policy has chosen p (it dies when its pins end); PolicyLRU
// never evicts a pinned chunk, so it stops after evictions enough to have
// reached p several times.
func pressurePinned(t *testing.T, s *Store, policy string, p *chunkSpec) {
	t.Helper()
	cond := func() bool { return evictedWhilePinned(s, "ns", p.id) }
	if policy == PolicyLRU {
		slots := s.Limit() / classSize(int64(p.size))
		cond = func() bool { return s.Stats().Evictions[ReasonPolicy] >= uint64(3*slots) }
	}
	fillPast(t, s, 100, 1000, 20000, cond, func() {
		if !s.Contains("ns", p.id) {
			t.Fatal("a pinned chunk was evicted")
		}
	})
	if policy == PolicyLRU && evictedWhilePinned(s, "ns", p.id) {
		t.Fatal("LRU evicted a pinned chunk")
	}
}

// afterPinsEnd checks what becomes of p once its pins end: with
// PolicyTinyLFU it was evicted while pinned and dies now, freeing its slot;
// with PolicyLRU it is an ordinary chunk again, evicted by later pressure.
func afterPinsEnd(t *testing.T, s *Store, policy string, p *chunkSpec, usedBefore int64) {
	t.Helper()
	if policy == PolicyLRU {
		if !s.Contains("ns", p.id) || s.Stats().PinnedChunks != 0 {
			t.Fatal("LRU dropped a chunk when its pins ended")
		}
		fillPast(t, s, 1<<30, 1000, 20000, func() bool { return !s.Contains("ns", p.id) }, func() {})
		return
	}
	if s.Contains("ns", p.id) {
		t.Fatal("a chunk the policy evicted while pinned is still held after its pins ended")
	}
	st := s.Stats()
	if st.UsedBytes != usedBefore-classSize(int64(p.size)) || st.PinnedChunks != 0 {
		t.Fatalf("the end of the pins did not free the slot: UsedBytes %d -> %d, PinnedChunks %d", usedBefore, st.UsedBytes, st.PinnedChunks)
	}
}

func TestPinnedChunkOutlivesEvictionPressureUntilRelease(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{PolicyLRU, PolicyTinyLFU} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			cfg, _ := clockConfig(t, 16<<10)
			cfg.Policy = policy
			s := openTest(t, cfg)
			p := newSpec(1, 1000)
			mustPut(t, s, "ns", p.id, p.data)
			n, pin, err := s.lookup("ns", []ID{p.id}, time.Minute)
			if err != nil || n != 1 || pin == 0 {
				t.Fatalf("Lookup = (%d, %d, %v)", n, pin, err)
			}
			if err := s.evict("ns", p.id); !errors.Is(err, ErrBusy) {
				t.Fatalf("Evict of a pinned chunk: %v, want ErrBusy", err)
			}
			pressurePinned(t, s, policy, p)
			readBack(t, s, "ns", p.id, p.data)
			used := s.Stats().UsedBytes
			if !s.Release(pin) {
				t.Fatal("Release reported false")
			}
			afterPinsEnd(t, s, policy, p, used)
		})
	}
}

func TestPinnedChunkOutlivesEvictionPressureUntilLeaseExpiry(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{PolicyLRU, PolicyTinyLFU} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			cfg, clk := clockConfig(t, 16<<10)
			cfg.Policy = policy
			cfg.MaxPinLease = time.Minute
			s := openTest(t, cfg)
			p := newSpec(1, 1000)
			mustPut(t, s, "ns", p.id, p.data)
			// A lease longer than MaxPinLease is capped.
			if n, pin, err := s.lookup("ns", []ID{p.id}, time.Hour); err != nil || n != 1 || pin == 0 {
				t.Fatalf("Lookup = (%d, %d, %v)", n, pin, err)
			}
			pressurePinned(t, s, policy, p)
			clk.Advance(time.Minute - time.Nanosecond)
			if _, leases := s.ExpireNow(); leases != 0 || !s.Contains("ns", p.id) {
				t.Fatalf("lease ended early: %d leases expired", leases)
			}
			readBack(t, s, "ns", p.id, p.data)
			used := s.Stats().UsedBytes
			clk.Advance(time.Nanosecond)
			if _, leases := s.ExpireNow(); leases != 1 {
				t.Fatalf("ExpireNow ended %d leases, want 1", leases)
			}
			afterPinsEnd(t, s, policy, p, used)
		})
	}
}

func TestOpenViewKeepsEvictedBytesUntilRelease(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<10))
	c := newSpec(1, 1000)
	mustPut(t, s, "ns", c.id, c.data)
	v, err := s.Get("ns", c.id)
	if err != nil {
		t.Fatal(err)
	}
	loc := v.Location()
	if err := s.evict("ns", c.id); err != nil {
		t.Fatal(err)
	}
	if s.Contains("ns", c.id) {
		t.Fatal("evicted chunk still held")
	}
	if _, err := s.Get("ns", c.id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of an evicted chunk: %v", err)
	}
	slot := classSize(int64(c.size))
	if st := s.Stats(); st.UsedBytes != slot || st.Chunks != 0 {
		t.Fatalf("slot under an open View not counted: %+v", st)
	}
	// Churn the store well past its size: nothing may land on the View's slot.
	var others []*chunkSpec
	for i := range 64 {
		o := newSpec(uint64(100+i), c.size)
		others = append(others, o)
		if err := s.put("ns", o.id, o.data, Checksum(o.data)); err != nil && !errors.Is(err, ErrRejected) && !errors.Is(err, ErrNoSpace) {
			t.Fatal(err)
		}
		if !bytes.Equal(v.Bytes(), c.data) {
			t.Fatal("the bytes under an open View changed")
		}
		if ov, err := s.Get("ns", o.id); err == nil {
			ol := ov.Location()
			ov.Release()
			checkNoOverlap(t, []span{{loc.Segment, loc.Offset, loc.Size, "view"}, {ol.Segment, ol.Offset, ol.Size, "chunk"}})
		}
	}
	used := s.Stats().UsedBytes
	v.Release()
	v.Release() // idempotent
	if got := s.Stats().UsedBytes; got != used-slot {
		t.Fatalf("UsedBytes %d -> %d after Release, want a drop of %d", used, got, slot)
	}
	quiescentCheck(t, s, "ns", others)
}

func TestWriteTheBudgetCannotHoldIsRefusedAndNotHeld(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<10))
	// Four staged 4 KiB writes take the whole budget.
	var staged []*Staged
	var specs []*chunkSpec
	for i := range 4 {
		c := newSpec(uint64(i), 4096)
		w, err := s.Stage("ns", c.id, 4096, Checksum(c.data))
		if err != nil {
			t.Fatal(err)
		}
		copy(w.Bytes(), c.data)
		staged, specs = append(staged, w), append(specs, c)
	}
	extra := newSpec(99, 4096)
	err := s.put("ns", extra.id, extra.data, Checksum(extra.data))
	if !errors.Is(err, ErrNoSpace) && !errors.Is(err, ErrRejected) {
		t.Fatalf("Put into a budget taken by staged writes: %v, want ErrNoSpace or ErrRejected", err)
	}
	if s.Contains("ns", extra.id) {
		t.Fatal("a refused chunk is held")
	}
	st := s.Stats()
	if st.UsedBytes != 16<<10 || st.Rejections[ReasonNoSpace]+st.Rejections[ReasonPolicy] != 1 {
		t.Fatalf("after the refusal: UsedBytes %d, rejections %v", st.UsedBytes, st.Rejections)
	}
	// The policy may have given the newcomer's room to a staged write: that
	// write's seal is refused; the others seal.
	for i, w := range staged {
		err := w.Seal()
		switch {
		case err == nil:
			readBack(t, s, "ns", specs[i].id, specs[i].data)
		case errors.Is(err, ErrRejected):
			if s.Contains("ns", specs[i].id) {
				t.Fatal("a write refused at seal is held")
			}
		default:
			t.Fatalf("Seal: %v", err)
		}
	}
	quiescentCheck(t, s, "ns", specs)
}

// A write the policy refuses is reported ErrRejected, by Stage or by Seal, and
// is not held: not readable, its slot returned, nothing left staged, one
// policy rejection counted, the chunks held before still there.
//
// The policy's decisions are scripted (scriptedPolicy), so the outcome does
// not depend on TinyLFU's lossy frequency sketch or on scheduling: the
// refusal reaches the store at each point it can, while the writer copies,
// at Seal (which waits for the decision) or at Stage (which waits for it only
// when the budget has no room). TinyLFU's own choices are measured by the
// loadtest policy benchmarks.
func TestAdmissionPolicyRefusalIsReportedRejectedAndNotHeld(t *testing.T) {
	t.Parallel()
	const limit = 16 << 10 // sixteen 1000-byte chunks (1 KiB slots)
	cases := []struct {
		name    string
		held    int  // chunks stored before the refused write
		direct  bool // the refused write fills Staged.Bytes
		early   bool // the refusal arrives while the writer copies
		atStage bool // the budget is full: Stage waits and reports the refusal
	}{
		{name: "decided at seal", held: 4},
		{name: "decided at seal, direct writer", held: 4, direct: true},
		{name: "decided while copying", held: 4, early: true},
		{name: "decided while copying, direct writer", held: 4, direct: true, early: true},
		{name: "decided at stage, budget full", held: 16, atStage: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, pol := openScripted(t, testConfig(t, limit))
			var universe []*chunkSpec
			for i := range tc.held {
				c := newSpec(uint64(i), 1000)
				mustPut(t, s, "ns", c.id, c.data)
				universe = append(universe, c)
			}
			c := newSpec(99, 1000)
			universe = append(universe, c)
			pol.setRefused(c.id, true)
			before := s.Stats()

			w, err := s.Stage("ns", c.id, int64(c.size), Checksum(c.data))
			if tc.atStage {
				wantErr(t, err, ErrRejected, c.id.String())
			} else {
				if err != nil {
					t.Fatalf("Stage with room in the budget: %v", err)
				}
				if pol.undecided() != 1 {
					t.Fatal("Stage waited for the policy although the budget had room")
				}
				half := c.size / 2
				if tc.direct {
					copy(w.Bytes(), c.data[:half])
				} else if _, err := w.Write(c.data[:half]); err != nil {
					t.Fatal(err)
				}
				if tc.early {
					pol.deliver()
				}
				if tc.direct {
					copy(w.Bytes()[half:], c.data[half:])
				} else if _, err := w.Write(c.data[half:]); err != nil {
					t.Fatalf("Write after the refusal, before Seal: %v", err)
				}
				wantErr(t, w.Seal(), ErrRejected, c.id.String())
			}
			if n := pol.undecided(); n != 0 {
				t.Fatalf("%d refusals never reached the store", n)
			}

			st := s.Stats()
			if st.UsedBytes != before.UsedBytes || st.StagedChunks != 0 || st.StagedBytes != 0 ||
				st.Chunks != before.Chunks || st.Seals != before.Seals ||
				st.Rejections[ReasonPolicy] != 1 || st.Rejections[ReasonNoSpace] != 0 {
				t.Fatalf("after the refusal: %+v\nbefore: %+v", st, before)
			}
			if s.Contains("ns", c.id) {
				t.Fatal("a refused chunk is held")
			}
			if _, err := s.Get("ns", c.id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get of a refused chunk: %v, want ErrNotFound", err)
			}
			for _, h := range universe[:tc.held] {
				if !s.Contains("ns", h.id) {
					t.Fatalf("%s, held before the refused write, is gone", h)
				}
			}
			quiescentCheck(t, s, "ns", universe)

			// Nothing of the refused write lingers: once the policy admits the
			// chunk, it is stored.
			pol.setRefused(c.id, false)
			mustPut(t, s, "ns", c.id, c.data)
			readBack(t, s, "ns", c.id, c.data)
			quiescentCheck(t, s, "ns", universe)
		})
	}
}

func TestClosedStoreRefusesCallsWithoutPanicking(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	c, d := newSpec(1, 1000), newSpec(2, 1000)
	mustPut(t, s, "ns", c.id, c.data)
	mustPut(t, s, "ns", d.id, d.data)
	v, err := s.Get("ns", c.id)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.evict("ns", c.id); err != nil {
		t.Fatal(err)
	}
	_, pin, _ := s.lookup("ns", []ID{d.id}, time.Minute)
	w, err := s.Stage("ns", testID(3), 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Stage("ns", testID(4), 100, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Stage after Close: %v", err)
	}
	if _, err := s.Get("ns", d.id); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, _, err := s.lookup("ns", []ID{d.id}, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Lookup after Close: %v", err)
	}
	if err := s.evict("ns", d.id); !errors.Is(err, ErrClosed) {
		t.Fatalf("Evict after Close: %v", err)
	}
	if err := w.Seal(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Seal after Close: %v", err)
	}
	// Late releases of handles taken before Close are harmless.
	v.Release()
	s.Release(pin)
	w.Abort()
	s.ExpireNow()
}

// TestAViewFoundCorruptIsDroppedAndStaysReadableUntilReleased: a View whose
// bytes fail their checksum drops the chunk, counts it, and keeps its bytes
// readable until Release.
func TestAViewFoundCorruptIsDroppedAndStaysReadableUntilReleased(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 16<<20))
	c := newSpec(1, 20000)
	mustPut(t, s, "ns", c.id, c.data)
	v, err := s.acquire("ns", c.id)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.verify(); err != nil {
		t.Fatalf("Verify of intact bytes: %v", err)
	}
	loc := v.Location()
	v.Release()

	f, _, err := s.segmentFile(loc.Segment)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{^c.data[0]}, loc.Offset); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// acquire hands out the View without reading the bytes; verify finds
	// the damage, drops the chunk, and leaves the View readable until
	// Release.
	v, err = s.acquire("ns", c.id)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	wantErr(t, v.verify(), ErrChecksum, c.id.String())
	if s.Contains("ns", c.id) {
		t.Fatal("chunk held after Verify found it corrupt")
	}
	if !bytes.Equal(v.Bytes()[1:], c.data[1:]) {
		t.Fatal("the View's bytes changed before Release")
	}
	if st := s.Stats(); st.ChecksumErrors != 1 || st.UsedBytes != classSize(int64(c.size)) {
		t.Fatalf("after Verify: %d checksum errors, UsedBytes %d", st.ChecksumErrors, st.UsedBytes)
	}
	v.Release()
	if st := s.Stats(); st.UsedBytes != 0 {
		t.Fatalf("UsedBytes %d after the last View of a dropped chunk was released", st.UsedBytes)
	}
	if _, err := s.acquire("ns", c.id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("acquire of a dropped chunk: %v", err)
	}
}

// TestHasReportsEveryHeldIDAndPinsThem: Has answers per id (not just the
// leading run) and pins every held chunk it reports.
func TestHasReportsEveryHeldIDAndPinsThem(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 8<<20))
	ids := []ID{testID(1), testID(2), testID(3), testID(4)}
	for _, i := range []int{0, 2, 3} {
		mustPut(t, s, "ns", ids[i], payload(ids[i], 1000))
	}
	held, pin, err := s.Has("ns", ids, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, true, true}; !slices.Equal(held, want) {
		t.Fatalf("Has = %v, want %v", held, want)
	}
	if pin == 0 || s.Stats().PinnedChunks != 3 {
		t.Fatalf("pin %d, %d pinned chunks; want a lease over 3", pin, s.Stats().PinnedChunks)
	}
	if err := s.evict("ns", ids[2]); !errors.Is(err, ErrBusy) {
		t.Fatalf("Evict of a pinned chunk: %v, want ErrBusy", err)
	}
	s.Release(pin)
	if s.Stats().PinnedChunks != 0 {
		t.Fatal("Release left pins")
	}
}

// TestCheckVotesBeforeSeal: Check reports an incomplete or corrupt staged
// chunk without publishing anything, and passes a good one.
func TestCheckVotesBeforeSeal(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 8<<20))
	id := testID(1)
	data := payload(id, 5000)
	w, err := s.Stage("ns", id, int64(len(data)), Checksum(data))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data[:100])
	wantErr(t, w.Check(), ErrIncomplete)
	w.Write(data[100:])
	if err := w.Check(); err != nil {
		t.Fatalf("Check of a complete chunk: %v", err)
	}
	if s.Contains("ns", id) {
		t.Fatal("Check published the chunk")
	}
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	bad, err := s.Stage("ns", testID(2), int64(len(data)), Checksum(data)^1)
	if err != nil {
		t.Fatal(err)
	}
	bad.Write(data)
	wantErr(t, bad.Check(), ErrChecksum)
	bad.Abort()
}
