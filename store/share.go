package store

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
)

// Amount is a part of the store's memory budget: a number of bytes, or a
// percentage of Config.MemoryLimit (so one setting means the same on nodes
// of different sizes). The zero Amount is none.
type Amount struct {
	Bytes   int64   `json:"bytes,omitempty"`
	Percent float64 `json:"percent,omitempty"`
}

// IsZero reports whether a is none.
func (a Amount) IsZero() bool { return a.Bytes == 0 && a.Percent == 0 }

// Of returns a in bytes of a budget of limit bytes.
func (a Amount) Of(limit int64) int64 {
	if a.Percent > 0 {
		return int64(math.Round(a.Percent / 100 * float64(limit)))
	}
	return a.Bytes
}

func (a Amount) check(what string) error {
	switch {
	case a.Bytes < 0, a.Percent < 0, a.Percent > 100, math.IsNaN(a.Percent):
		return fmt.Errorf("%w: %s must be 0 to 100 %% or a non-negative number of bytes", ErrInvalid, what)
	case a.Bytes > 0 && a.Percent > 0:
		return fmt.Errorf("%w: %s is either bytes or a percentage, not both", ErrInvalid, what)
	}
	return nil
}

// Share is a namespace's part of this store's memory budget. Each store
// enforces its own: the shares of a cluster are the same setting applied
// on every node, each node against its own budget.
type Share struct {
	// Guarantee is what the namespace keeps however much other namespaces
	// write: their writes never evict its chunks while it holds no more
	// than this. The guarantees of all namespaces add up to at most the
	// budget. Zero: none.
	Guarantee Amount `json:"guarantee"`
	// Cap is the most the namespace may hold: beyond it, its writes evict
	// its own oldest chunks, never another namespace's. Zero: none.
	Cap Amount `json:"cap"`
}

// IsZero reports whether sh sets nothing.
func (sh Share) IsZero() bool { return sh.Guarantee.IsZero() && sh.Cap.IsZero() }

func (sh Share) limits(budget int64) shareLimits {
	return shareLimits{guarantee: sh.Guarantee.Of(budget), cap: sh.Cap.Of(budget)}
}

// SetShare sets namespace ns's share of the budget (the zero Share removes
// it), in force at once and kept in the catalog for the next Open. While no
// namespace has a share, eviction is one LRU over every chunk. A share
// whose guarantee is above its cap, or that would make the guarantees add
// up to more than the budget, is ErrInvalid, as is any share under a
// policy other than PolicyLRU. Lowering a cap evicts nothing at once: the
// namespace's next writes evict its own chunks until it is under the cap.
// Does not block on the disk.
func (s *Store) SetShare(ns string, sh Share) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.exit()
	if err := s.checkShare(ns, sh); err != nil {
		return fmt.Errorf("cannot set the share of namespace %q: %w", ns, err)
	}
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if err := s.checkGuarantees(ns, sh); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("cannot set the share of namespace %q: %w", ns, err)
	}
	if sh.IsZero() {
		delete(s.shares, ns)
		s.cat.queue(catOp{kind: opShareDel, name: ns})
	} else {
		s.shares[ns] = sh
		b, _ := json.Marshal(sh) // cannot fail: two structs of numbers
		s.cat.queue(catOp{kind: opSharePut, name: ns, val: b})
	}
	m := s.shareLimitsLocked()
	s.mu.Unlock()
	s.pol.setShares(m)
	return nil
}

// checkShare checks what a share says by itself.
func (s *Store) checkShare(ns string, sh Share) error {
	if err := ValidateNamespace(ns); err != nil {
		return err
	}
	if err := sh.Guarantee.check("guarantee"); err != nil {
		return err
	}
	if err := sh.Cap.check("cap"); err != nil {
		return err
	}
	if !sh.IsZero() && s.cfg.Policy != PolicyLRU {
		return fmt.Errorf("%w: namespace shares need the %q eviction policy (this store runs %q)", ErrInvalid, PolicyLRU, s.cfg.Policy)
	}
	lim := sh.limits(s.cfg.MemoryLimit)
	if lim.cap > 0 && lim.guarantee > lim.cap {
		return fmt.Errorf("%w: guarantee of %d bytes above the cap of %d", ErrInvalid, lim.guarantee, lim.cap)
	}
	return nil
}

// checkGuarantees refuses sh for ns when the guarantees would add up to
// more than the budget. mu held.
func (s *Store) checkGuarantees(ns string, sh Share) error {
	total := sh.Guarantee.Of(s.cfg.MemoryLimit)
	for name, o := range s.shares {
		if name != ns {
			total += o.Guarantee.Of(s.cfg.MemoryLimit)
		}
	}
	if total > s.cfg.MemoryLimit {
		return fmt.Errorf("%w: the guarantees would add up to %d bytes, more than the memory limit of %d", ErrInvalid, total, s.cfg.MemoryLimit)
	}
	return nil
}

// shareLimitsLocked returns the shares in bytes by namespace number,
// interning the namespaces. mu held.
func (s *Store) shareLimitsLocked() map[uint32]shareLimits {
	m := make(map[uint32]shareLimits, len(s.shares))
	for ns, sh := range s.shares {
		k, _, err := s.key(ns, ID{}, true)
		if err == nil {
			m[k.ns] = sh.limits(s.cfg.MemoryLimit)
		}
	}
	return m
}

// Shares returns every namespace's share, by namespace; the caller owns the
// map.
func (s *Store) Shares() map[string]Share {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.shares)
}

// loadShares takes the shares the catalog kept, before recovery offers the
// chunks to the policy. One that cannot be read or no longer fits (the
// memory limit was lowered) is dropped with a log line, as are all under a
// policy other than PolicyLRU; a catalog that cannot be read leaves none in
// force, with a log line.
func (s *Store) loadShares() {
	recs, err := s.cat.shareRecords()
	if err != nil {
		s.log.Warn("cannot read the namespace shares; none is in force", "err", err)
		return
	}
	for ns, b := range recs {
		var sh Share
		err := json.Unmarshal(b, &sh)
		if err == nil {
			err = s.checkShare(ns, sh)
		}
		if err == nil {
			err = s.checkGuarantees(ns, sh)
		}
		if err != nil {
			s.log.Warn("namespace share dropped from the catalog", "namespace", ns, "err", err)
			s.cat.queue(catOp{kind: opShareDel, name: ns})
			continue
		}
		s.shares[ns] = sh
	}
	if len(s.shares) > 0 {
		s.pol.setShares(s.shareLimitsLocked())
		s.log.Info("namespace shares restored from the catalog", "namespaces", len(s.shares))
	}
}
