package store

// Staging reports whether a write of (ns, id) is staged now: stage was
// called and the chunk is neither sealed nor aborted yet. It does not block
// on I/O; false after Close.
func (s *Store) Staging(ns string, id ID) bool {
	if !s.enter() {
		return false
	}
	defer s.exit()
	s.mu.Lock()
	defer s.mu.Unlock()
	k, known, err := s.key(ns, id, false)
	if err != nil || !known {
		return false
	}
	e := s.idx.get(k, k.hash())
	return e != nil && e.state == stateStaged
}
