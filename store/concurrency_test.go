package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// Concurrency: many goroutines on overlapping chunks. Each operation checks
// what it can see on its own; once they are done the store must be in a
// state the quiescent invariants accept. Run with -race.

const concNS = "conc"

func concUniverse(n int, seed uint64) []*chunkSpec {
	rng := rand.New(rand.NewPCG(seed, 1))
	var u []*chunkSpec
	for i := range n {
		u = append(u, newSpec(seed<<32|uint64(i), propSizes[rng.IntN(len(propSizes))]))
	}
	return u
}

// runWorkers runs workers goroutines, each calling op ops times with its own
// random source, and waits for them.
func runWorkers(t *testing.T, workers, ops int, op func(rng *rand.Rand) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for range ops {
				if err := op(rng); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// readExact reads a chunk: not held is fine, anything but its own bytes is not.
func readExact(s *Store, c *chunkSpec) (bool, error) {
	v, err := s.Get(concNS, c.id)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("Get %v: %w", c, err)
	}
	defer v.Release()
	if !bytes.Equal(v.Bytes(), c.data) {
		return false, fmt.Errorf("Get %v: other bytes", c)
	}
	return true, nil
}

// concPut stages, writes (in frames, or directly) and seals or aborts c.
func concPut(s *Store, rng *rand.Rand, c *chunkSpec, direct bool) error {
	w, err := s.Stage(concNS, c.id, int64(c.size), Checksum(c.data))
	switch {
	case err == nil:
	case errors.Is(err, ErrAlreadyHeld), errors.Is(err, ErrBusy), errors.Is(err, ErrRejected), errors.Is(err, ErrNoSpace):
		return nil
	default:
		return fmt.Errorf("Stage %v: %w", c, err)
	}
	if direct {
		copy(w.Bytes(), c.data)
	} else {
		for off := 0; off < c.size; {
			n := min(c.size-off, 1+rng.IntN(c.size))
			if _, err := w.Write(c.data[off : off+n]); err != nil {
				w.Abort()
				if errors.Is(err, ErrLeaseExpired) {
					return nil
				}
				return fmt.Errorf("Write %v: %w", c, err)
			}
			off += n
		}
	}
	if rng.IntN(10) == 0 {
		w.Abort()
		return nil
	}
	if err := w.Seal(); err != nil && !errors.Is(err, ErrRejected) && !errors.Is(err, ErrLeaseExpired) {
		return fmt.Errorf("Seal %v: %w", c, err)
	}
	return nil
}

func TestConcurrentOperationsKeepInvariants(t *testing.T) {
	t.Parallel()
	for _, p := range []string{PolicyLRU, PolicyTinyLFU} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			testConcurrentOperationsKeepInvariants(t, p)
		})
	}
}

func testConcurrentOperationsKeepInvariants(t *testing.T, policy string) {
	cfg, clk := clockConfig(t, 512<<10)
	cfg.Policy = policy
	cfg.SegmentSize = 64 << 10
	cfg.StageLease = time.Hour // no write outlives its lease here
	cfg.MaxPinLease = time.Hour
	s := openTest(t, cfg)
	universe := concUniverse(40, 7)

	runWorkers(t, 6, 1500, func(rng *rand.Rand) error {
		c := universe[rng.IntN(len(universe))]
		switch r := rng.IntN(100); {
		case r < 25:
			return concPut(s, rng, c, false)
		case r < 35:
			return concPut(s, rng, c, true)
		case r < 55:
			_, err := readExact(s, c)
			return err
		case r < 60:
			// A View stays valid across other goroutines' evictions.
			v, err := s.Get(concNS, c.id)
			if err != nil {
				return nil
			}
			defer v.Release()
			if err := s.evict(concNS, c.id); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrBusy) {
				return fmt.Errorf("Evict %v: %w", c, err)
			}
			if !bytes.Equal(v.Bytes(), c.data) {
				return fmt.Errorf("bytes under a View of %v changed", c)
			}
			return nil
		case r < 75:
			// A pinned chunk is readable and cannot be evicted until released.
			ids := []ID{c.id}
			for range rng.IntN(4) {
				ids = append(ids, universe[rng.IntN(len(universe))].id)
			}
			n, pin, err := s.lookup(concNS, ids, time.Hour)
			if errors.Is(err, ErrPinLimit) {
				return nil // the other workers' pins hold MaxPinnedBytes: refused, nothing pinned
			}
			if err != nil {
				return fmt.Errorf("Lookup: %w", err)
			}
			for _, id := range ids[:n] {
				ok, err := readExact(s, findSpec(universe, id))
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("chunk %s pinned by lease %d is not held", id, pin)
				}
			}
			if n > 0 {
				if err := s.evict(concNS, ids[0]); !errors.Is(err, ErrBusy) {
					return fmt.Errorf("Evict of a pinned chunk: %v, want ErrBusy", err)
				}
				if !s.Release(pin) {
					return fmt.Errorf("Release of live lease %d reported false", pin)
				}
			}
			return nil
		case r < 88:
			if err := s.evict(concNS, c.id); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrBusy) {
				return fmt.Errorf("Evict %v: %w", c, err)
			}
			return nil
		case r < 93:
			clk.Advance(10 * time.Millisecond)
			if staged, leases := s.ExpireNow(); staged != 0 || leases != 0 {
				return fmt.Errorf("ExpireNow ended %d stages and %d leases, none had run out", staged, leases)
			}
			return nil
		default:
			st := s.Stats()
			if st.UsedBytes > st.LimitBytes || st.UsedBytes+st.RetainedFreeBytes > st.LimitBytes {
				return fmt.Errorf("UsedBytes %d + retained %d over the limit %d", st.UsedBytes, st.RetainedFreeBytes, st.LimitBytes)
			}
			if st.ChecksumErrors != 0 {
				return fmt.Errorf("%d checksum errors", st.ChecksumErrors)
			}
			return nil
		}
	})
	held := quiescentCheck(t, s, concNS, universe)
	st := s.Stats()
	t.Logf("%d chunks held; seals %d, evictions %v, rejections %v", len(held), st.Seals, st.Evictions, st.Rejections)
	if st.Seals == 0 || st.ChecksumErrors != 0 {
		t.Fatalf("seals %d, checksum errors %d", st.Seals, st.ChecksumErrors)
	}
}

func TestConcurrentStageExpiryNeverCorruptsChunks(t *testing.T) {
	t.Parallel()
	cfg, clk := clockConfig(t, 512<<10)
	cfg.SegmentSize = 64 << 10
	cfg.StageLease = 50 * time.Millisecond
	s := openTest(t, cfg)
	universe := concUniverse(40, 11)

	// One in six operations moves the clock past part of every lease and
	// expires what ran out, while writers copy in small frames (writes that
	// outlive their lease are refused; nobody writes through Bytes here,
	// whose slice a lease expiry would free under the writer).
	runWorkers(t, 6, 1000, func(rng *rand.Rand) error {
		c := universe[rng.IntN(len(universe))]
		switch r := rng.IntN(6); r {
		case 0:
			clk.Advance(20 * time.Millisecond)
			s.ExpireNow()
			return nil
		case 1, 2:
			_, err := readExact(s, c)
			return err
		default:
			return concPut(s, rng, c, false)
		}
	})
	quiescentCheck(t, s, concNS, universe)
	if st := s.Stats(); st.ChecksumErrors != 0 {
		t.Fatalf("%d checksum errors", st.ChecksumErrors)
	} else {
		t.Logf("stage expiries %d, seals %d", st.StageExpired, st.Seals)
	}
}

func findSpec(u []*chunkSpec, id ID) *chunkSpec {
	for _, c := range u {
		if c.id == id {
			return c
		}
	}
	panic("BUG: id not in the universe")
}
