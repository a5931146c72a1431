package store

import (
	"bytes"
	"fmt"
)

// The catalog also keeps a small record per namespace for the caller (the
// node keeps its namespace registry there), so that what a cluster was told
// survives a restart of the process, and of the host: unlike chunk records
// these do not depend on the shared memory, and a catalog whose segments
// are gone keeps them. The store does not read the records: they are
// opaque bytes under a name.

// maxNamespaceRecord bounds one namespace record.
const maxNamespaceRecord = 64 << 10

// SaveNamespaceRecord keeps rec as the record of namespace name, replacing
// the one it had, for NamespaceRecords after this Open and the next. The
// store copies rec. Like chunk records it is written in the next catalog
// batch (within catalogDelay, without fsync; a failed write is retried and
// reported by Health). A name or a record that is too long is ErrInvalid;
// a closed store is ErrClosed. It does not block on the disk.
func (s *Store) SaveNamespaceRecord(name string, rec []byte) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.exit()
	if err := checkRecordName(name); err != nil {
		return err
	}
	if len(rec) > maxNamespaceRecord {
		return fmt.Errorf("%w: the record of namespace %q is %d bytes, at most %d", ErrInvalid, name, len(rec), maxNamespaceRecord)
	}
	s.cat.queue(catOp{kind: opNamespacePut, name: name, val: bytes.Clone(rec)})
	return nil
}

// DeleteNamespaceRecord forgets the record of namespace name (none is
// fine), as SaveNamespaceRecord writes. It does not block on the disk.
func (s *Store) DeleteNamespaceRecord(name string) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.exit()
	if err := checkRecordName(name); err != nil {
		return err
	}
	s.cat.queue(catOp{kind: opNamespaceDel, name: name})
	return nil
}

// NamespaceRecords returns every namespace record saved (those still
// waiting for a catalog write included), by name; the caller owns the
// bytes. Blocks on the disk.
func (s *Store) NamespaceRecords() (map[string][]byte, error) {
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.exit()
	return s.cat.namespaceRecords()
}

// checkRecordName checks a namespace record's name: 1 to MaxNamespaceLen
// bytes (it is a bbolt key).
func checkRecordName(name string) error {
	if name == "" || len(name) > MaxNamespaceLen {
		return fmt.Errorf("%w: namespace record name of %d bytes (1 to %d)", ErrInvalid, len(name), MaxNamespaceLen)
	}
	return nil
}
