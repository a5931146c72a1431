package store

// Live reports whether the slot is still staged: not sealed, aborted, expired
// or evicted. A holder of Staged handles (such as an owner keeping them under
// stage tokens until a coordinator commits) uses it to forget handles whose
// lease the store ended: the store alone decides when a stage lease expires.
// Safe to call from any goroutine; takes the store's lock briefly.
func (w *Staged) Live() bool {
	if w == nil || w.e == nil {
		return false
	}
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed && w.e.state == stateStaged
}
