package store

import (
	"errors"
	"fmt"
)

// Health reports what keeps the store from keeping its promises, nil when
// nothing does: ErrCatalog while the catalog cannot be written (chunks are
// held and served, but a restart would not serve the ones whose records
// wait), ErrSegmentLost while segment files deleted or truncated under the
// store still hold chunks (found by a write, a read, or the background
// check). The errors are joined (errors.Join). A node turns its readiness
// off while Health is not nil. Safe for concurrent use; never blocks on I/O
// (it takes the store's mutex briefly).
func (s *Store) Health() error {
	s.mu.Lock()
	seg := s.segmentHealth()
	s.mu.Unlock()
	return errors.Join(s.cat.health(), seg)
}

// segmentHealth is nil unless a lost segment still holds chunks: then
// ErrSegmentLost naming how many and one of their files. mu held.
func (s *Store) segmentHealth() error {
	var n int
	var path string
	for _, seg := range s.arena.segs {
		if seg.lost {
			n++
			path = seg.path
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d segments, such as %q, hold chunks that a restart would not serve", ErrSegmentLost, n, path)
}

// segmentLost marks seg lost for err (from segment.checkFile): no slot is
// allocated in it any more, and Health reports it while it holds chunks.
// mu held.
func (s *Store) segmentLost(seg *segment, err error) {
	if seg.lost || seg.mem == nil {
		return
	}
	s.st.segmentsLost++
	s.log.Error("segment file lost under the running store; no more chunks are written to it", "err", err)
	s.arena.markLost(seg)
}

// faulted checks the file of a segment whose memory faulted and marks it
// lost when it was deleted or truncated; it returns that error, or nil when
// the file is whole (the filesystem had no space for a page). Takes mu.
func (s *Store) faulted(seg *segment) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || seg.mem == nil {
		return nil
	}
	err := seg.checkFile()
	if err != nil {
		s.segmentLost(seg, err)
	}
	return err
}

// checkSegments looks at every segment's file (one fstat each, under the
// store's mutex) and marks those deleted or truncated under the store as
// lost. The background loop calls it every MaintenanceInterval; tests call
// it directly.
func (s *Store) checkSegments() {
	if !s.enter() {
		return
	}
	defer s.exit()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, seg := range s.arena.segs {
		if seg.lost {
			continue
		}
		if err := seg.checkFile(); err != nil {
			s.segmentLost(seg, err)
		}
	}
}
