package store

import "errors"

// Health reports what keeps the store from keeping its promises, nil when
// nothing does: ErrCatalog while the catalog cannot be written (chunks are
// held and served, but a restart would not serve the ones whose records
// wait). A node turns its readiness off while Health is not nil. Safe for
// concurrent use; never blocks on I/O.
func (s *Store) Health() error {
	return errors.Join(s.cat.health())
}
