package store

import (
	"fmt"
	"time"
)

// PinID names a pin lease taken by Has; 0 means no lease.
type PinID uint64

// lease pins sealed entries until it is released or expires.
type lease struct {
	entries []*entry
	expiry  int64 // unix nanoseconds
	// client is who took the lease (HasFor; "" for none) and charged the
	// slot bytes its share of MaxPinnedBytes counts for it.
	client  string
	charged int64
}

// lookup returns how many leading ids of the ordered list are held now. With
// pinFor > 0 (capped at Config.MaxPinLease) those chunks are pinned against
// eviction until Release(pin) or until the lease expires; pin is 0 when
// nothing was pinned. Every id asked counts as an access for the eviction
// policy. Never blocks on I/O. Only tests call it: the node asks each owner
// with Has and works out the leading run itself.
func (s *Store) lookup(ns string, ids []ID, pinFor time.Duration) (n int, pin PinID, err error) {
	if !s.enter() {
		return 0, 0, ErrClosed
	}
	defer s.exit()
	_, n, pin, err = s.probe("", ns, ids, pinFor, true)
	return n, pin, err
}

// Has reports for each id whether it is held now. With pinFor > 0 (capped at
// Config.MaxPinLease) every held one is pinned against eviction until
// Release(pin) or until the lease expires; pin is 0 when nothing was pinned.
// Pins that would hold more than Config.MaxPinnedBytes of slots in all are
// refused: ErrPinLimit, and nothing is pinned.
// Every id asked counts as an access for the eviction policy. A coordinator
// asks each owner about its share of a request's ids this way and works out
// the leading run itself. Safe for concurrent use; never blocks on I/O.
func (s *Store) Has(ns string, ids []ID, pinFor time.Duration) (held []bool, pin PinID, err error) {
	return s.HasFor("", ns, ids, pinFor)
}

// HasFor is Has for a client: its pins are charged to its share of
// MaxPinnedBytes (package fairshare), every chunk a lease pins counted in
// full, and a lease that would take it past its share is refused with
// ErrPinLimit. A chunk the client has kept pinned without a break for
// MaxPinHold is answered held but not pinned. Client "" is charged to no
// share.
func (s *Store) HasFor(client, ns string, ids []ID, pinFor time.Duration) (held []bool, pin PinID, err error) {
	if !s.enter() {
		return nil, 0, ErrClosed
	}
	defer s.exit()
	held, _, pin, err = s.probe(client, ns, ids, pinFor, false)
	return held, pin, err
}

// probe looks ids up, pins what it finds (only the leading run when leading
// is set) and records every id as an access.
func (s *Store) probe(client, ns string, ids []ID, pinFor time.Duration, leading bool) (held []bool, n int, pin PinID, err error) {
	if pinFor < 0 {
		return nil, 0, 0, fmt.Errorf("%w: pin lease must not be negative, got %v", ErrInvalid, pinFor)
	}
	pinFor = min(pinFor, s.cfg.MaxPinLease)
	hashes := make([]uint64, len(ids))
	if !leading {
		held = make([]bool, len(ids))
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, 0, 0, ErrClosed
	}
	k, _, err := s.key(ns, ID{}, true)
	if err != nil {
		s.mu.Unlock()
		return nil, 0, 0, err
	}
	p := pinning{s: s, client: client, now: s.cfg.Now().UnixNano(), pinFor: pinFor}
	for i, id := range ids {
		k.id = id
		h := k.hash()
		// Every id counts as an access, also those after the first miss: the
		// engine asked for them.
		hashes[i] = h
		if leading && n != i {
			continue
		}
		e := s.idx.get(k, h)
		if e == nil || e.state != stateSealed {
			continue
		}
		if leading {
			n = i + 1
		} else {
			held[i] = true
			n++
		}
		if err := p.pin(e); err != nil {
			s.mu.Unlock()
			return nil, 0, 0, fmt.Errorf("cannot pin %d chunks of namespace %s: %w", len(ids), ns, err)
		}
	}
	s.nsLookups(k.ns, len(ids), n)
	pin, err = p.done()
	s.mu.Unlock()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("cannot pin %d chunks of namespace %s: %w", len(ids), ns, err)
	}
	if s.cfg.Lower != nil {
		n = s.probeLower(ns, ids, held, n, pinFor, leading)
	}
	for _, h := range hashes {
		s.pol.touch(h)
	}
	return held, n, pin, nil
}

// pinning is the lease one probe builds, under one hold of mu.
type pinning struct {
	s      *Store
	client string
	now    int64
	pinFor time.Duration
	l      *lease
	added  int64 // slot bytes of entries this lease pins first
}

// pin adds sealed entry e to the lease (unless pinFor is 0, or the client
// has held e past MaxPinHold). Past MaxPinnedBytes it undoes the lease and
// returns ErrPinLimit. mu held.
func (p *pinning) pin(e *entry) error {
	s := p.s
	if p.pinFor <= 0 || !s.mayPin(p.client, e, p.now) {
		return nil
	}
	if p.l == nil {
		p.l = &lease{expiry: p.now + int64(p.pinFor), client: p.client}
	}
	if e.pins == 0 {
		p.added += e.slot.seg.slotSize
		if s.st.pinnedBytes+p.added > s.cfg.MaxPinnedBytes {
			s.unpinRefused(p.l)
			return fmt.Errorf("%w (%d of %d bytes pinned)", ErrPinLimit, s.st.pinnedBytes, s.cfg.MaxPinnedBytes)
		}
		s.st.pinnedChunks++
		e.pinned.Store(true)
	}
	e.pins++
	p.l.entries = append(p.l.entries, e)
	p.l.charged += e.slot.seg.slotSize
	return nil
}

// done charges the lease to its client's share (or undoes it with
// ErrPinLimit past the share) and registers it. mu held.
func (p *pinning) done() (PinID, error) {
	s, l := p.s, p.l
	if l == nil {
		return 0, nil
	}
	if l.client != "" {
		if err := s.clients.pinned.Take(l.client, l.charged, s.st.pinnedBytes); err != nil {
			s.unpinRefused(l)
			return 0, fmt.Errorf("%w: %w of the pinned-bytes budget", ErrPinLimit, err)
		}
		s.holdPins(l.client, l, p.now)
	}
	s.st.pinnedBytes += p.added
	s.nextPin++
	s.leases[s.nextPin] = l
	return PinID(s.nextPin), nil
}

// Release ends a pin lease. Releasing an unknown or expired lease is a
// no-op that returns false.
func (s *Store) Release(pin PinID) bool {
	if !s.enter() {
		return false
	}
	defer s.exit()
	s.mu.Lock()
	defer s.unlock()
	if s.closed {
		return false
	}
	l, ok := s.leases[uint64(pin)]
	if !ok {
		return false
	}
	delete(s.leases, uint64(pin))
	s.unpin(l)
	return true
}

// unpinRefused undoes the pins of a lease that was refused before its
// pinned bytes were counted: every entry is sealed and unchanged since it
// was pinned, under the same hold of mu. l may be nil. mu held.
func (s *Store) unpinRefused(l *lease) {
	if l == nil {
		return
	}
	for _, e := range l.entries {
		e.pins--
		if e.pins == 0 {
			s.st.pinnedChunks--
			e.pinned.Store(false)
		}
	}
}

// unpin drops a lease's pins. A chunk the policy evicted while pinned dies
// with its last pin. mu held.
func (s *Store) unpin(l *lease) {
	s.unholdPins(l)
	for _, e := range l.entries {
		e.pins--
		if e.pins > 0 {
			continue
		}
		e.pinned.Store(false)
		s.st.pinnedBytes -= e.slot.seg.slotSize
		switch {
		case e.state == stateSealed:
			s.st.pinnedChunks--
			if e.evicted {
				s.st.evictions[ReasonPolicy]++
				if s.kill(e, reasonPolicy) {
					s.forgetLater(e)
				}
				s.killCompanions(e)
			}
		case e.state == stateDead:
			s.maybeFree(e)
		}
	}
}
