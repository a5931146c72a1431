package store

import (
	"math/rand/v2"
	"time"
)

// catalogDelay batches catalog changes: a flush runs this long after the
// first change waiting, so a crash loses at most that much of the catalog
// (the chunks' bytes are in shared memory either way).
const catalogDelay = 10 * time.Millisecond

// maintain is the store's one background goroutine: it expires stage and
// pin leases every MaintenanceInterval (with ±10 % jitter) and flushes the
// catalog within catalogDelay of a change. Close stops it and waits for it.
func (s *Store) maintain() {
	defer close(s.done)
	next := func() *time.Timer {
		d := s.cfg.MaintenanceInterval
		return time.NewTimer(d + time.Duration(rand.Int64N(int64(d)/5+1)) - d/10)
	}
	t := next()
	defer func() { t.Stop() }()
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
		case <-t.C:
			s.ExpireNow()
			t = next()
		}
		if err := s.cat.flush(); err != nil {
			s.log.Error("catalog flush failed", "err", err)
		}
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

// FlushCatalog writes queued catalog changes now. Blocks on bbolt.
func (s *Store) FlushCatalog() error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.exit()
	return s.cat.flush()
}
