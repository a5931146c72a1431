package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketMeta     = []byte("meta")
	bucketSegments = []byte("segments")
	bucketChunks   = []byte("chunks")
	// bucketNamespaces holds the caller's namespace records, by name
	// (SaveNamespaceRecord). Unlike the chunk records they do not depend
	// on the shared memory: a reset keeps them.
	bucketNamespaces = []byte("namespaces")
	// bucketShares holds the namespace shares (SetShare), by namespace;
	// like the namespace records, a reset keeps them.
	bucketShares   = []byte("shares")
	keyNodeID      = []byte("node_id")
	keyNextSegment = []byte("next_segment")
)

// catalog is the bbolt file that keeps the node identity and, for a warm
// restart, the segments and sealed chunks. Changes are queued by the store
// (under its mutex), appended in batches to the journal by flush and folded
// into bbolt by fold (catalog_journal.go), without fsync: see the package
// documentation for why that is safe. A batch whose append fails stays
// queued, ahead of later changes, for the next flush: a change is lost only
// if the process ends before any append succeeds.
type catalog struct {
	db     *bolt.DB
	path   string
	nodeID string
	// nextSegment is the lowest segment id never used, as of Open.
	nextSegment uint32
	// jr is the journal; guarded by flushMu (nil until startJournal).
	jr *journal

	mu      sync.Mutex // guards pending, unfolded and folding
	pending []catOp
	// unfolded are the changes in the journal that bbolt lacks, in order;
	// folding those a fold is writing to bbolt now.
	unfolded, folding []catOp
	// kick tells the maintenance loop that changes are waiting (cap 1).
	kick    chan struct{}
	flushMu sync.Mutex // orders flushes
	// failures counts failed writes; lastErr is the error of the last write,
	// nil when it succeeded. lastErr is guarded by mu.
	failures atomic.Uint64
	lastErr  error
	// writeFault, when set, fails every catalog write with it: the test hook
	// for a disk that refuses writes. Guarded by flushMu; nil in production.
	writeFault error
}

type catOpKind uint8

const (
	opSegmentPut catOpKind = iota + 1
	opSegmentDel
	opChunkPut
	opChunkDel
	opNamespacePut
	opNamespaceDel
	opSharePut
	opShareDel
)

type catOp struct {
	kind catOpKind
	key  [8]byte // segment id, or segment id + slot
	name string  // namespace record or share name
	val  []byte
}

// chunkRecord is a sealed chunk as the catalog keeps it.
type chunkRecord struct {
	seg  uint32
	slot int32
	size uint32
	crc  uint32
	id   ID
	ns   string
	// place is the chunk's placement group key (nil: placed by its id, or
	// recorded before placement keys were kept).
	place *ID
	// name is the chunk's key name (nil: none).
	name *string
}

func (c *catalog) queue(op catOp) {
	c.mu.Lock()
	first := len(c.pending) == 0
	c.pending = append(c.pending, op)
	c.mu.Unlock()
	if first {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// recordSegment is the arena's segment hook.
func (c *catalog) recordSegment(seg *segment, created bool) {
	if !created {
		c.queue(catOp{kind: opSegmentDel, key: segKey(seg.id)})
		return
	}
	c.queue(catOp{kind: opSegmentPut, key: segKey(seg.id), val: encodeSegmentValue(seg.slotSize, seg.nslots)})
}

func (c *catalog) addChunk(ns string, e *entry) {
	v := encodeChunkValue(ns, e.size, e.crc, e.key.id, e.place, e.name)
	c.queue(catOp{kind: opChunkPut, key: chunkKeyBytes(e.slot.seg.id, e.slot.slot), val: v})
}

func (c *catalog) removeChunk(e *entry) {
	c.queue(catOp{kind: opChunkDel, key: chunkKeyBytes(e.slot.seg.id, e.slot.slot)})
}

// flush appends the queued changes to the journal as one record. When the
// append fails the changes stay queued, ahead of any queued since, the
// failure is counted and health reports it until a flush succeeds. Blocks
// on the disk (one write).
func (c *catalog) flush() error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	ops := c.pending
	c.pending = nil
	c.mu.Unlock()
	if len(ops) == 0 {
		return nil
	}
	ops = compactOps(ops)
	err := c.writeFault
	if err == nil {
		err = c.jr.append(ops)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.pending = append(ops, c.pending...)
		c.lastErr = fmt.Errorf("cannot write catalog at %q: %w", c.path, err)
		c.failures.Add(1)
		return c.lastErr
	}
	c.unfolded = append(c.unfolded, ops...)
	c.lastErr = nil
	return nil
}

// foldDue reports whether the journal has grown enough to be folded.
func (c *catalog) foldDue() bool {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	return c.jr.size >= journalFoldBytes
}

// fold writes the journal's changes into bbolt in one transaction and
// removes the journal files that held them. Appends go on meanwhile, to a
// new journal file (started first, under flushMu); when the bbolt write
// fails the files stay, and so do their changes in unfolded, for the next
// fold. Only the maintenance loop and Close call it, never two at once.
// Blocks on bbolt.
func (c *catalog) fold() error {
	c.flushMu.Lock()
	c.mu.Lock()
	empty := len(c.unfolded) == 0
	c.mu.Unlock()
	if empty && c.jr.size == 0 {
		c.flushMu.Unlock()
		return nil
	}
	if err := c.writeFault; err != nil {
		c.flushMu.Unlock()
		return fmt.Errorf("cannot write catalog at %q: %w", c.path, err)
	}
	if err := c.jr.rotate(); err != nil {
		c.flushMu.Unlock()
		return err
	}
	files := len(c.jr.closed)
	c.mu.Lock()
	ops := c.unfolded
	c.unfolded, c.folding = nil, ops
	c.mu.Unlock()
	c.flushMu.Unlock()

	err := c.write(compactOps(ops))
	c.mu.Lock()
	c.folding = nil
	if err != nil {
		c.unfolded = append(ops, c.unfolded...)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.flushMu.Lock()
	c.jr.removeClosed(files)
	c.flushMu.Unlock()
	return nil
}

// write applies ops in one bbolt transaction. Blocks on bbolt.
func (c *catalog) write(ops []catOp) error {
	err := c.db.Update(func(tx *bolt.Tx) error {
		segs, chunks := tx.Bucket(bucketSegments), tx.Bucket(bucketChunks)
		for _, op := range ops {
			var err error
			switch op.kind {
			case opSegmentPut:
				err = segs.Put(op.key[:4], op.val)
				if err == nil {
					var next [4]byte
					binary.BigEndian.PutUint32(next[:], binary.BigEndian.Uint32(op.key[:4])+1)
					err = tx.Bucket(bucketMeta).Put(keyNextSegment, next[:])
				}
			case opSegmentDel:
				err = segs.Delete(op.key[:4])
			case opChunkPut:
				err = chunks.Put(op.key[:], op.val)
			case opChunkDel:
				err = chunks.Delete(op.key[:])
			case opNamespacePut:
				err = tx.Bucket(bucketNamespaces).Put([]byte(op.name), op.val)
			case opNamespaceDel:
				err = tx.Bucket(bucketNamespaces).Delete([]byte(op.name))
			case opSharePut:
				err = tx.Bucket(bucketShares).Put([]byte(op.name), op.val)
			case opShareDel:
				err = tx.Bucket(bucketShares).Delete([]byte(op.name))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot write catalog at %q: %w", c.path, err)
	}
	return nil
}

// health is nil while the last catalog write succeeded (or none failed);
// otherwise ErrCatalog wrapping the write's error. Never blocks on I/O.
func (c *catalog) health() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastErr == nil {
		return nil
	}
	return fmt.Errorf("%w: %d changes waiting: %w", ErrCatalog, len(c.pending), c.lastErr)
}

// compactOps returns ops with the same effect on the catalog, cheaper to
// apply: of the chunk operations only the last per key is kept (a chunk
// sealed and evicted before a flush costs nothing), and they are applied in
// key order after the segment operations (whose order is kept), so bbolt
// appends to its pages instead of shifting them. Keys are independent, so
// only each key's last operation decides the result.
func compactOps(ops []catOp) []catOp {
	last := make(map[[8]byte]int, len(ops))
	for i, op := range ops {
		if op.kind == opChunkPut || op.kind == opChunkDel {
			last[op.key] = i
		}
	}
	out := make([]catOp, 0, len(ops))
	var chunks []catOp
	for i, op := range ops {
		switch {
		case op.kind != opChunkPut && op.kind != opChunkDel:
			out = append(out, op)
		case last[op.key] == i:
			chunks = append(chunks, op)
		}
	}
	slices.SortFunc(chunks, func(a, b catOp) int { return bytes.Compare(a.key[:], b.key[:]) })
	return append(out, chunks...)
}

// load reads every segment and chunk record. A malformed record is not
// returned: its key is queued for deletion and counted in bad.
func (c *catalog) load() (segs []segmentRecord, chunks []chunkRecord, bad int, err error) {
	var drop []catOp
	err = c.db.View(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketSegments).ForEach(func(k, v []byte) error {
			r, err := decodeSegmentRecord(k, v)
			if err != nil {
				if len(k) == 4 {
					drop = append(drop, catOp{kind: opSegmentDel, key: segKey(binary.BigEndian.Uint32(k))})
				}
				bad++
				return nil
			}
			segs = append(segs, r)
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketChunks).ForEach(func(k, v []byte) error {
			r, err := decodeChunkRecord(k, v)
			if err != nil {
				if len(k) == 8 {
					var key [8]byte
					copy(key[:], k)
					drop = append(drop, catOp{kind: opChunkDel, key: key})
				}
				bad++
				return nil
			}
			chunks = append(chunks, r)
			return nil
		})
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("cannot read catalog at %q: %w", c.path, err)
	}
	for _, op := range drop {
		c.queue(op)
	}
	return segs, chunks, bad, nil
}

// namespaceRecords returns the namespace records as written, with the
// changes still queued applied over them. Blocks on bbolt.
func (c *catalog) namespaceRecords() (map[string][]byte, error) {
	return c.named(bucketNamespaces, opNamespacePut, opNamespaceDel)
}

// shareRecords returns the namespace shares as written, with the changes
// still queued applied over them. Blocks on bbolt.
func (c *catalog) shareRecords() (map[string][]byte, error) {
	return c.named(bucketShares, opSharePut, opShareDel)
}

// named reads a bucket of records by name and applies the queued put and
// del operations over it.
func (c *catalog) named(bucket []byte, put, del catOpKind) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := c.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			out[string(k)] = bytes.Clone(v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read the %s records of catalog %q: %w", bucket, c.path, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range slices.Concat(c.folding, c.unfolded, c.pending) {
		switch op.kind {
		case put:
			out[op.name] = bytes.Clone(op.val)
		case del:
			delete(out, op.name)
		}
	}
	return out, nil
}

// reset removes every segment and chunk record (the node identity and the
// namespace records stay).
func (c *catalog) reset() error {
	err := c.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketSegments, bucketChunks} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot reset catalog at %q: %w", c.path, err)
	}
	return nil
}

// close closes the journal and bbolt. The journal files are removed when
// bbolt has all their changes (after a fold), else kept for the next open
// to replay.
func (c *catalog) close() error {
	var errs []error
	if c.jr != nil {
		c.mu.Lock()
		folded := len(c.unfolded) == 0 && len(c.pending) == 0
		c.mu.Unlock()
		if err := c.jr.close(folded && c.jr.size == 0); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("cannot close catalog at %q: %w", c.path, err))
	}
	return errors.Join(errs...)
}

// setWriteFault makes every later catalog write fail with err (nil: succeed
// again). Only tests call it.
func (c *catalog) setWriteFault(err error) {
	c.flushMu.Lock()
	c.writeFault = err
	c.flushMu.Unlock()
}

// pendingOps is the number of changes waiting for a catalog write.
func (c *catalog) pendingOps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}
