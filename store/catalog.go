package store

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

var (
	bucketMeta     = []byte("meta")
	bucketSegments = []byte("segments")
	bucketChunks   = []byte("chunks")
	keyNodeID      = []byte("node_id")
	keyNextSegment = []byte("next_segment")
)

// catalog is the bbolt file that keeps the node identity and, for a warm
// restart, the segments and sealed chunks. Changes are queued by the store
// (under its mutex) and written in batches by flush, without fsync: see the
// package documentation for why that is safe. A batch whose write fails stays
// queued, ahead of later changes, for the next flush: a change is lost only
// if the process ends before any write succeeds.
type catalog struct {
	db     *bolt.DB
	path   string
	nodeID string
	// nextSegment is the lowest segment id never used, as of Open.
	nextSegment uint32

	mu      sync.Mutex // guards pending
	pending []catOp
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
)

type catOp struct {
	kind catOpKind
	key  [8]byte // segment id, or segment id + slot
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
}

func openCatalog(dir string) (*catalog, error) {
	path := filepath.Join(dir, "catalog.db")
	db, err := bolt.Open(path, 0o640, &bolt.Options{Timeout: time.Second, NoSync: true, NoFreelistSync: true})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("cannot open catalog at %q: another process holds it", path)
		}
		return nil, fmt.Errorf("cannot open catalog at %q: %w", path, err)
	}
	c := &catalog{db: db, path: path, kick: make(chan struct{}, 1)}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketSegments, bucketChunks} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyNextSegment); len(v) == 4 {
			c.nextSegment = binary.BigEndian.Uint32(v)
		}
		if v := meta.Get(keyNodeID); v != nil {
			c.nodeID = string(v)
			return nil
		}
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		c.nodeID = hex.EncodeToString(b[:])
		return meta.Put(keyNodeID, []byte(c.nodeID))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot initialise catalog at %q: %w", path, err)
	}
	return c, nil
}

func segKey(id uint32) (k [8]byte) {
	binary.BigEndian.PutUint32(k[:4], id)
	return k
}

func chunkKeyBytes(seg uint32, slot int32) (k [8]byte) {
	binary.BigEndian.PutUint32(k[:4], seg)
	binary.BigEndian.PutUint32(k[4:], uint32(slot))
	return k
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
	v := make([]byte, 12)
	binary.BigEndian.PutUint64(v[:8], uint64(seg.slotSize))
	binary.BigEndian.PutUint32(v[8:], uint32(seg.nslots))
	c.queue(catOp{kind: opSegmentPut, key: segKey(seg.id), val: v})
}

func (c *catalog) addChunk(ns string, e *entry) {
	v := make([]byte, 8+IDSize+len(ns))
	binary.BigEndian.PutUint32(v[0:], e.size)
	binary.BigEndian.PutUint32(v[4:], e.crc)
	copy(v[8:], e.key.id[:])
	copy(v[8+IDSize:], ns)
	c.queue(catOp{kind: opChunkPut, key: chunkKeyBytes(e.slot.seg.id, e.slot.slot), val: v})
}

func (c *catalog) removeChunk(e *entry) {
	c.queue(catOp{kind: opChunkDel, key: chunkKeyBytes(e.slot.seg.id, e.slot.slot)})
}

// flush writes the queued changes in one transaction. When the write fails
// the changes stay queued, ahead of any queued since, the failure is counted
// and health reports it until a write succeeds. Blocks on bbolt.
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
	err := c.write(ops)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.pending = append(ops, c.pending...)
		c.lastErr = err
		c.failures.Add(1)
		return err
	}
	c.lastErr = nil
	return nil
}

// write applies ops in one bbolt transaction. Blocks on bbolt.
func (c *catalog) write(ops []catOp) error {
	err := c.db.Update(func(tx *bolt.Tx) error {
		if c.writeFault != nil {
			return c.writeFault
		}
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

// load reads every segment and chunk record.
func (c *catalog) load() (segs map[uint32][2]int64, chunks []chunkRecord, err error) {
	segs = make(map[uint32][2]int64)
	err = c.db.View(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketSegments).ForEach(func(k, v []byte) error {
			if len(k) != 4 || len(v) != 12 {
				return fmt.Errorf("malformed segment record %x", k)
			}
			segs[binary.BigEndian.Uint32(k)] = [2]int64{int64(binary.BigEndian.Uint64(v[:8])), int64(binary.BigEndian.Uint32(v[8:]))}
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketChunks).ForEach(func(k, v []byte) error {
			if len(k) != 8 || len(v) < 8+IDSize {
				return fmt.Errorf("malformed chunk record %x", k)
			}
			r := chunkRecord{
				seg:  binary.BigEndian.Uint32(k[:4]),
				slot: int32(binary.BigEndian.Uint32(k[4:])),
				size: binary.BigEndian.Uint32(v[0:]),
				crc:  binary.BigEndian.Uint32(v[4:]),
				ns:   string(v[8+IDSize:]),
			}
			copy(r.id[:], v[8:8+IDSize])
			chunks = append(chunks, r)
			return nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read catalog at %q: %w", c.path, err)
	}
	return segs, chunks, nil
}

// reset removes every segment and chunk record (the node identity stays).
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

func (c *catalog) close() error {
	if err := c.db.Close(); err != nil {
		return fmt.Errorf("cannot close catalog at %q: %w", c.path, err)
	}
	return nil
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
