package store

// Staging reports whether a write of (ns, id) is staged now: stage was
// called and the chunk is neither sealed nor aborted yet. It does not block
// on I/O; false after Close.
func (s *Store) Staging(ns string, id ID) bool { return s.inState(ns, id, stateStaged) }
