package store

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
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.exit()
	return s.acquire(ns, id)
}
