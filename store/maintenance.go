package store

import (
	"math/rand/v2"
	"time"
)

// catalogDelay batches catalog changes: a flush runs this long after the
// first change waiting, so a crash loses at most that much of the catalog
// (the chunks' bytes are in shared memory either way).
const catalogDelay = 10 * time.Millisecond

// A failed catalog write is retried after catalogRetryMin, doubling up to
// catalogRetryMax (±10 % jitter) while it keeps failing.
const (
	catalogRetryMin = 50 * time.Millisecond
	catalogRetryMax = 5 * time.Second
)

// jitter returns d ±10 %.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/5+1)) - d/10
}

// maintain is the store's one background goroutine: it expires stage and
// pin leases and checks the segment files (checkSegments) every
// MaintenanceInterval (with ±10 % jitter) and flushes the
// catalog within catalogDelay of a change. A failed flush keeps its changes
// and is retried with backoff (catalogRetryMin doubling to catalogRetryMax)
// until one succeeds. Close stops it and waits for it.
func (s *Store) maintain() {
	defer close(s.done)
	t := time.NewTimer(jitter(s.cfg.MaintenanceInterval))
	defer func() { t.Stop() }()
	var (
		retry   *time.Timer
		retryC  <-chan time.Time
		backoff time.Duration
	)
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-s.cat.kick:
			select {
			case <-s.stop:
				return
			case <-time.After(catalogDelay):
			}
		case <-retryC:
			retryC = nil
		case <-t.C:
			s.ExpireNow()
			s.checkSegments()
			t.Reset(jitter(s.cfg.MaintenanceInterval))
		}
		err := s.cat.flush()
		switch {
		case err != nil:
			backoff = min(max(2*backoff, catalogRetryMin), catalogRetryMax)
			s.log.Error("catalog write failed; its changes are kept and retried", "err", err, "retry_in", backoff)
			if retry == nil {
				retry = time.NewTimer(jitter(backoff))
			} else {
				retry.Reset(jitter(backoff))
			}
			retryC = retry.C
		case backoff > 0:
			backoff, retryC = 0, nil
			s.log.Info("catalog writes succeed again")
		}
		if err == nil && s.cat.foldDue() {
			s.foldCatalog()
		}
	}
}

// foldCatalog folds the catalog's journal into bbolt (catalog.fold). A
// failure is counted and logged; the journal keeps the changes, and the next
// flush that finds the journal long enough tries again.
func (s *Store) foldCatalog() {
	if err := s.cat.fold(); err != nil {
		s.cat.failures.Add(1)
		s.log.Error("cannot fold the catalog journal into the catalog; the journal keeps its changes", "err", err)
	}
}

// ExpireNow ends the stage leases and pin leases that have run out as of
// Config.Now, and returns how many of each it ended. A staged chunk whose
// lease ended is not held: its slot is freed now, or when a writer still in
// Write or holding Staged.Bytes lets go, and its later Write and its Seal
// report ErrLeaseExpired. A chunk the policy evicted while pinned dies with
// its last pin. The background loop calls it every
// Config.MaintenanceInterval; tests call it directly. Safe for concurrent
// use; may block briefly on the policy.
func (s *Store) ExpireNow() (staged, leases int) {
	if !s.enter() {
		return 0, 0
	}
	defer s.exit()
	now := s.cfg.Now().UnixNano()
	s.mu.Lock()
	defer s.unlock()
	if s.closed {
		return 0, 0
	}
	for e, deadline := range s.staging {
		if e.state == stateStaged && deadline != 0 && deadline <= now {
			s.st.stageExpired++
			if s.kill(e, reasonExpired) {
				s.forgetLater(e)
			}
			staged++
		}
	}
	for id, l := range s.leases {
		if l.expiry <= now {
			delete(s.leases, id)
			s.unpin(l)
			leases++
		}
	}
	return staged, leases
}

// FlushCatalog writes queued catalog changes now. When the write fails the
// changes stay queued for the next flush (the background loop retries with
// backoff) and Health reports ErrCatalog until a write succeeds. Blocks on
// bbolt.
func (s *Store) FlushCatalog() error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.exit()
	return s.cat.flush()
}
