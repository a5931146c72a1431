package store

import (
	"fmt"

	"github.com/kvring/kvring/internal/fairshare"
)

// clientShares are the per-client parts of the staged-bytes and pinned-bytes
// budgets (package fairshare: a client alone may use most of a budget, and a
// second one always finds room), and how long each client has kept each
// chunk pinned without a break (the renewal bound, Config.MaxPinHold). Calls
// with client "" are the node's own work and are charged to no client: they
// meet only the budgets' totals. Guarded by Store.mu.
type clientShares struct {
	staged *fairshare.Ledger
	pinned *fairshare.Ledger
	// stagedBy is the client each attributed staged entry is charged to.
	stagedBy map[*entry]string
	// holds[client][e] is client's unbroken pinning of e.
	holds map[string]map[*entry]*pinHold
}

// pinHold is one client's unbroken pinning of one chunk: how many of its
// leases pin it, and since when (unix ns) it has had one.
type pinHold struct {
	leases int
	since  int64
}

func newClientShares(cfg *Config) clientShares {
	return clientShares{staged: fairshare.New(cfg.MaxStagedBytes, 0), pinned: fairshare.New(cfg.MaxPinnedBytes, 0),
		stagedBy: make(map[*entry]string), holds: make(map[string]map[*entry]*pinHold)}
}

// takeStaged charges a staged entry of size bytes to client, or refuses it
// with ErrNoSpace past the client's share. mu held.
func (s *Store) takeStaged(client string, e *entry, size int64) error {
	if client == "" {
		return nil
	}
	if err := s.clients.staged.Take(client, size, s.st.stagedBytes); err != nil {
		return fmt.Errorf("%w: %w of the staged-bytes budget", ErrNoSpace, err)
	}
	s.clients.stagedBy[e] = client
	return nil
}

// unstage counts staged entry e out of the staged totals and its client's
// share (it was sealed or killed). mu held.
func (s *Store) unstage(e *entry) {
	delete(s.staging, e)
	s.st.stagedChunks--
	s.st.stagedBytes -= int64(e.size)
	if c, ok := s.clients.stagedBy[e]; ok {
		delete(s.clients.stagedBy, e)
		s.clients.staged.Give(c, int64(e.size))
	}
}

// mayPin reports whether client may pin e under a new lease at now: no
// client pins one chunk without a break for longer than MaxPinHold (the
// chunk is then answered held, not pinned, until the client's earlier
// leases on it end). mu held.
func (s *Store) mayPin(client string, e *entry, now int64) bool {
	if client == "" || s.cfg.MaxPinHold <= 0 {
		return true
	}
	h := s.clients.holds[client][e]
	return h == nil || now-h.since < int64(s.cfg.MaxPinHold)
}

// holdPins records that l, a lease of client, pins its entries. mu held.
func (s *Store) holdPins(client string, l *lease, now int64) {
	if client == "" {
		return
	}
	m := s.clients.holds[client]
	if m == nil {
		m = make(map[*entry]*pinHold)
		s.clients.holds[client] = m
	}
	for _, e := range l.entries {
		h := m[e]
		if h == nil {
			h = &pinHold{since: now}
			m[e] = h
		}
		h.leases++
	}
}

// unholdPins undoes holdPins and gives back l's charge, as l ends. mu held.
func (s *Store) unholdPins(l *lease) {
	if l.client == "" {
		return
	}
	s.clients.pinned.Give(l.client, l.charged)
	m := s.clients.holds[l.client]
	for _, e := range l.entries {
		if h := m[e]; h != nil {
			if h.leases--; h.leases <= 0 {
				delete(m, e)
			}
		}
	}
	if len(m) == 0 {
		delete(s.clients.holds, l.client)
	}
}

// ClientShares reports what client holds of the staged-bytes and
// pinned-bytes budgets now. Safe for concurrent use; never blocks on I/O.
func (s *Store) ClientShares(client string) (staged, pinned int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients.staged.Used(client), s.clients.pinned.Used(client)
}

// MaxStagedBytes is the staged-bytes budget (Config.MaxStagedBytes, its
// default worked out). The local socket sizes its budget of unsealed blobs
// by it.
func (s *Store) MaxStagedBytes() int64 { return s.cfg.MaxStagedBytes }
