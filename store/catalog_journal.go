package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kvring/kvring/internal/crc32c"
)

// The catalog journal: catalog changes are appended to a journal file, one
// record per flush, and folded into the bbolt file in the background once
// the journal holds journalFoldBytes. A flush that answers a commit then
// costs one small write(2) instead of a bbolt transaction (copy-on-write of
// every page on the path to each changed key, then a write of each): a
// profile of 32 KiB Redis-protocol SETs on a three-node cluster spent 13 %
// of a node's CPU in those transactions.
//
// Files are dir/catalog.journal-<sequence, 16 hex digits>. Appends go to the
// newest; a fold closes it (a rotation), starts the next and, once bbolt has
// the folded changes, removes the closed ones. Opening the catalog replays
// every journal file in sequence order into bbolt and removes them. The
// changes are idempotent in order (puts and deletes by key; a segment put
// sets the next segment id to its id + 1), so replaying a journal whose
// fold had reached bbolt before a crash changes nothing.
//
// A record is: payload length (4 bytes, big-endian), CRC-32C of the payload
// (4), payload. The payload is a sequence of changes, each: kind (1 byte),
// key (8), name length (uvarint) and name, value length (uvarint) and value.
// Like bbolt's, the journal is written without fsync (see the package
// documentation). A record cut short or whose checksum does not match ends
// the replay of its file with a log line: a write the process saw succeed
// is whole in the page cache, so only a host crash makes one, and a host
// crash loses the shared memory the catalog describes anyway.

// journalFoldBytes is the journal length that makes the store fold it into
// bbolt.
const journalFoldBytes = 4 << 20

// journalMaxRecord bounds one record's payload when replaying, so a damaged
// length cannot make the replay allocate gigabytes.
const journalMaxRecord = 256 << 20

const journalPrefix = "catalog.journal-"

// journal is the open journal file and the closed ones not yet folded.
// Guarded by the catalog's flushMu.
type journal struct {
	dir    string
	seq    uint64
	f      *os.File
	size   int64
	closed []string // journal files rotated out, oldest first, not yet removed
	buf    []byte   // reused encoding buffer
}

// journalPath is the path of journal file seq in dir.
func journalPath(dir string, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%016x", journalPrefix, seq))
}

// journalFiles lists dir's journal files in sequence order, with the
// highest sequence (0 when there is none).
func journalFiles(dir string) (paths []string, last uint64, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot list the catalog journals in %q: %w", dir, err)
	}
	var seqs []uint64
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), journalPrefix)
		if !ok || len(rest) != 16 {
			continue
		}
		seq, err := strconv.ParseUint(rest, 16, 64)
		if err != nil {
			continue
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for _, s := range seqs {
		paths = append(paths, journalPath(dir, s))
	}
	if len(seqs) > 0 {
		last = seqs[len(seqs)-1]
	}
	return paths, last, nil
}

// openJournal creates journal file seq in dir for appending.
func openJournal(dir string, seq uint64) (*journal, error) {
	path := journalPath(dir, seq)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, fmt.Errorf("cannot create catalog journal %q: %w", path, err)
	}
	return &journal{dir: dir, seq: seq, f: f}, nil
}

// append writes ops as one record. A write that fails or falls short is cut
// back off the file, so the next record starts where this one did. Blocks on
// the disk.
func (j *journal) append(ops []catOp) error {
	j.buf = encodeJournalRecord(j.buf[:0], ops)
	err := rawWriteAll(int(j.f.Fd()), j.buf)
	if err == nil {
		j.size += int64(len(j.buf))
		return nil
	}
	if terr := j.f.Truncate(j.size); terr != nil {
		err = errors.Join(err, fmt.Errorf("cannot cut the partial record off: %w", terr))
	}
	return fmt.Errorf("cannot append to catalog journal %q: %w", j.f.Name(), err)
}

// rotate closes the current file (kept in closed until remove) and starts
// the next. On failure the current file stays open for appends.
func (j *journal) rotate() error {
	next, err := openJournal(j.dir, j.seq+1)
	if err != nil {
		return err
	}
	j.closed = append(j.closed, j.f.Name())
	_ = j.f.Close() // written with write(2); nothing is buffered
	j.f, j.seq, j.size = next.f, next.seq, 0
	return nil
}

// removeClosed removes the first n closed files, whose changes bbolt now
// has. A file that cannot be removed is replayed again at the next open,
// which changes nothing.
func (j *journal) removeClosed(n int) {
	for _, p := range j.closed[:n] {
		_ = os.Remove(p)
	}
	j.closed = slices.Delete(j.closed, 0, n)
}

// close closes the current file; with remove, it and the closed files are
// deleted too (bbolt has every change).
func (j *journal) close(remove bool) error {
	err := j.f.Close()
	if remove {
		j.closed = append(j.closed, j.f.Name())
		j.removeClosed(len(j.closed))
	}
	if err != nil {
		return fmt.Errorf("cannot close catalog journal: %w", err)
	}
	return nil
}

// encodeJournalRecord appends the record of ops to b.
func encodeJournalRecord(b []byte, ops []catOp) []byte {
	b = append(b, make([]byte, 8)...)
	for _, op := range ops {
		b = append(b, byte(op.kind))
		b = append(b, op.key[:]...)
		b = binary.AppendUvarint(b, uint64(len(op.name)))
		b = append(b, op.name...)
		b = binary.AppendUvarint(b, uint64(len(op.val)))
		b = append(b, op.val...)
	}
	payload := b[8:]
	binary.BigEndian.PutUint32(b[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint32(b[4:8], crc32c.Checksum(payload))
	return b
}

// errJournalTorn: a journal record is cut short or fails its checksum.
var errJournalTorn = errors.New("catalog journal record is torn")

// readJournal returns the changes in the journal file at path, in order, up
// to its first torn record (reported with errJournalTorn alongside the
// changes before it). Blocks on the disk.
func readJournal(path string) ([]catOp, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read catalog journal %q: %w", path, err)
	}
	var ops []catOp
	for len(data) > 0 {
		rec, rest, err := nextJournalRecord(data)
		if err != nil {
			return ops, fmt.Errorf("%w: %q at %d bytes from its end: %w", errJournalTorn, path, len(data), err)
		}
		ops, err = decodeJournalOps(ops, rec)
		if err != nil {
			return ops, fmt.Errorf("%w: %q at %d bytes from its end: %w", errJournalTorn, path, len(data), err)
		}
		data = rest
	}
	return ops, nil
}

// nextJournalRecord splits data into the payload of its first record and
// the rest.
func nextJournalRecord(data []byte) (payload, rest []byte, err error) {
	if len(data) < 8 {
		return nil, nil, io.ErrUnexpectedEOF
	}
	n := binary.BigEndian.Uint32(data[0:4])
	if n > journalMaxRecord || int64(n) > int64(len(data)-8) {
		return nil, nil, fmt.Errorf("record of %d bytes with %d left: %w", n, len(data)-8, io.ErrUnexpectedEOF)
	}
	payload = data[8 : 8+n]
	if crc32c.Checksum(payload) != binary.BigEndian.Uint32(data[4:8]) {
		return nil, nil, errors.New("checksum mismatch")
	}
	return payload, data[8+n:], nil
}

// decodeJournalOps appends the changes of one record's payload to ops. The
// changes copy what they keep out of p.
func decodeJournalOps(ops []catOp, p []byte) ([]catOp, error) {
	for len(p) > 0 {
		if len(p) < 9 || catOpKind(p[0]) < opSegmentPut || catOpKind(p[0]) > opShareDel {
			return ops, fmt.Errorf("malformed change of kind %d in %d bytes", p[0], len(p))
		}
		op := catOp{kind: catOpKind(p[0])}
		copy(op.key[:], p[1:9])
		p = p[9:]
		name, rest, err := journalBytes(p)
		if err != nil {
			return ops, err
		}
		val, rest, err := journalBytes(rest)
		if err != nil {
			return ops, err
		}
		op.name, p = string(name), rest
		if val != nil {
			op.val = slices.Clone(val)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// journalBytes reads a uvarint length and that many bytes (nil when zero).
func journalBytes(p []byte) (b, rest []byte, err error) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return nil, nil, fmt.Errorf("malformed length in %d bytes", len(p))
	}
	if n == 0 {
		return nil, p[k:], nil
	}
	return p[k : k+int(n)], p[k+int(n):], nil
}
