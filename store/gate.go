package store

// enter admits a public call: it returns false once Close has begun, and
// otherwise keeps Close from unmapping segments or closing the policy until
// the matching exit. Calls must not nest enter (a pending Close would
// deadlock a nested read lock); internal helpers run inside one enter.
func (s *Store) enter() bool {
	if s.closing.Load() {
		return false
	}
	s.gate.RLock()
	if s.closing.Load() {
		s.gate.RUnlock()
		return false
	}
	return true
}

func (s *Store) exit() { s.gate.RUnlock() }
