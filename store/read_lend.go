package store

import (
	"errors"
	"fmt"
)

// Lend returns a View of the chunk without the checksum pass of Get, for
// handing the chunk's memory to a process on the same host that reads it
// itself (the local socket's kvring_get): one pass over the bytes fewer,
// which would otherwise cost as much as the reader's own. The bytes were
// verified when the chunk was sealed (and by the restart's recovery);
// View.Checksum is their CRC-32C for a reader that verifies them. A chunk
// that is not held is ErrNotFound. The caller must Release the View; it
// keeps the slot from being freed or reused meanwhile. Counted as a read
// (Stats.Gets, Stats.Hits) like Get.
func (s *Store) Lend(ns string, id ID) (*View, error) {
	v, err := s.lend(ns, id)
	if errors.Is(err, ErrNotFound) && s.cfg.Lower != nil {
		return s.readLower(ns, id, true, err) // outside the gate: a promotion enters it
	}
	return v, err
}

func (s *Store) lend(ns string, id ID) (*View, error) {
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.exit()
	return s.acquire(ns, id)
}

// Read runs f with the chunk's bytes under a fault guard: if a process the
// segment was handed to truncates the file meanwhile, the fault is an error
// wrapping ErrFault instead of a crash of this process. f must not keep
// the slice or hand it to other goroutines while it runs, and must leave
// no lock held if it stops half-way (a fault unwinds it like a panic).
// Blocks as long as f.
func (v *View) Read(f func([]byte)) error {
	if err := guardFault(func() { f(v.buf) }); err != nil {
		return fmt.Errorf("cannot read chunk %s: %w", v.e.key.id, err)
	}
	return nil
}

// Guarded runs f, which reads or writes the mapping of a segment handed to
// another process (a blob's or a lent chunk's bytes), under a fault guard:
// a fault on that memory (the file was truncated) is an error wrapping
// ErrFault instead of a crash. f must not start goroutines that touch the
// mapping and must leave no lock held if it stops half-way. Any other
// panic passes through. Blocks as long as f.
func Guarded(f func()) error { return guardFault(f) }
