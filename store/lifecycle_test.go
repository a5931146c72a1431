package store

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRestartWithSmallerLimitDropsWhatDoesNotFit: a node restarted with a
// smaller memory limit serves what fits, drops the rest, and stays within
// its new limit.
func TestRestartWithSmallerLimitDropsWhatDoesNotFit(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 4<<20)
	s := openTest(t, cfg)
	const n = 16
	for i := uint64(0); i < n; i++ {
		id := testID(i)
		mustPut(t, s, "ns", id, payload(id, 256<<10))
	}
	settle(s)
	held := s.Stats().Chunks
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.MemoryLimit, cfg.MaxStagedBytes = 1<<20, 1<<20
	s2 := openTest(t, cfg)
	settle(s2)
	st := s2.Stats()
	if st.UsedBytes > st.LimitBytes {
		t.Fatalf("after restart UsedBytes %d > limit %d", st.UsedBytes, st.LimitBytes)
	}
	if st.Chunks == 0 || st.Chunks >= held {
		t.Fatalf("after restart with a quarter of the limit: %d chunks held (was %d)", st.Chunks, held)
	}
	for i := uint64(0); i < n; i++ {
		id := testID(i)
		if s2.Contains("ns", id) {
			readBack(t, s2, "ns", id, payload(id, 256<<10))
		}
	}
}

// TestSegmentIDsAreNeverReusedAcrossRestarts: a segment id names one segment
// for the life of the data directory, so a client's cached mapping can never
// alias a new segment.
func TestSegmentIDsAreNeverReusedAcrossRestarts(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 8<<20)
	cfg.SegmentSize = 1 << 20
	s := openTest(t, cfg)
	seen := map[uint32]bool{}
	var max uint32
	for i := uint64(0); i < 8; i++ {
		id := testID(i)
		mustPut(t, s, "ns", id, payload(id, 512<<10))
		v, err := s.Get("ns", id)
		if err != nil {
			t.Fatal(err)
		}
		seen[v.Location().Segment] = true
		max = v.Location().Segment
		v.Release()
	}
	// Empty every segment so all but one are deleted, then restart.
	for i := uint64(0); i < 8; i++ {
		s.evict("ns", testID(i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openTest(t, cfg)
	id := testID(100)
	mustPut(t, s2, "ns", id, payload(id, 512<<10))
	for i := uint64(101); i < 104; i++ {
		id := testID(i)
		mustPut(t, s2, "ns", id, payload(id, 512<<10))
	}
	for i := uint64(100); i < 104; i++ {
		v, err := s2.Get("ns", testID(i))
		if err != nil {
			t.Fatal(err)
		}
		seg := v.Location().Segment
		v.Release()
		if seen[seg] && seg != max {
			// The last segment of a class survives emptying; any other id
			// seen before must not come back.
			t.Fatalf("segment id %d reused after restart", seg)
		}
	}
}

// TestCloseWaitsForCallsInFlight: Close while other goroutines put, get and
// look up neither panics nor corrupts; calls after Close return ErrClosed.
func TestCloseWaitsForCallsInFlight(t *testing.T) {
	t.Parallel()
	s, err := Open(testConfig(t, 8<<20))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var done atomic.Int64
	start := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			<-start
			for i := 0; i < 300; i++ {
				id := testID(uint64(g*1000 + i))
				err := s.put("ns", id, payload(id, 32<<10), Checksum(payload(id, 32<<10)))
				if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrRejected) && !errors.Is(err, ErrNoSpace) {
					t.Errorf("Put: %v", err)
					return
				}
				if v, err := s.Get("ns", id); err == nil {
					v.Release()
				}
				s.lookup("ns", []ID{id}, time.Second)
				done.Add(1)
			}
		}(g)
	}
	close(start)
	// Close once the writers are well under way.
	for deadline := time.Now().Add(10 * time.Second); done.Load() < 40 && time.Now().Before(deadline); {
		runtime.Gosched()
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	if _, err := s.Stage("ns", testID(1), 10, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Stage after Close: %v, want ErrClosed", err)
	}
}

// TestDirectWriterKeepsItsSlotPastTheLease: a writer filling the slot through
// Bytes keeps it until Seal or Abort even when the lease expires, so no other
// chunk is placed under its writes; the Seal then reports the expiry.
func TestDirectWriterKeepsItsSlotPastTheLease(t *testing.T) {
	t.Parallel()
	cfg, clock := clockConfig(t, 1<<20)
	s := openTest(t, cfg)
	id := testID(1)
	data := payload(id, 256<<10)
	w, err := s.Stage("ns", id, int64(len(data)), Checksum(data))
	if err != nil {
		t.Fatal(err)
	}
	buf := w.Bytes()
	clock.Advance(31 * time.Second) // past the default 30 s lease
	if staged, _ := s.ExpireNow(); staged != 1 {
		t.Fatalf("ExpireNow freed %d staged writes, want 1", staged)
	}
	used := s.Stats().UsedBytes
	if used == 0 {
		t.Fatal("the expired direct writer's slot was freed while the writer holds it")
	}
	// Other chunks fill the store; none may land in the writer's slot.
	for i := uint64(2); i < 6; i++ {
		other := testID(i)
		s.put("ns", other, payload(other, 256<<10), Checksum(payload(other, 256<<10)))
	}
	copy(buf, data)
	for i := uint64(2); i < 6; i++ {
		if s.Contains("ns", testID(i)) {
			readBack(t, s, "ns", testID(i), payload(testID(i), 256<<10))
		}
	}
	wantErr(t, w.Seal(), ErrLeaseExpired)
	if s.Contains("ns", id) {
		t.Fatal("a chunk whose lease expired is held")
	}
}
