package disk

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/store"
)

// ErrDegraded reports that the tier stopped offloading after a write
// failed (Health); reads of what it holds go on.
var ErrDegraded = errors.New("disk: tier degraded")

// loc is where the index finds a chunk on disk: 16 bytes.
type loc struct {
	region uint32 // region seq
	block  uint32 // offset of the record in blocks
	size   uint32 // payload bytes
	ns     uint16 // interned namespace
	hlen   uint16 // record header bytes, and locRead (a header is under 4 KiB)
}

// locRead marks in loc.hlen a chunk read from disk since it was written
// there: its region's eviction writes it again (reinsert).
const locRead = 0x8000

// hdrLen is the record header's length.
func (l loc) hdrLen() int { return int(l.hlen &^ locRead) }

// wasRead reports whether the chunk was read since it was written.
func (l loc) wasRead() bool { return l.hlen&locRead != 0 }

// same reports whether l and o are the same record, read or not.
func (l loc) same(o loc) bool {
	l.hlen &^= locRead
	o.hlen &^= locRead
	return l == o
}

// region is one region file.
type region struct {
	seq  uint32
	ver  uint32 // format version (payloadOff)
	path string
	fd   int
	// used is the end of the last record (the footer's offset once
	// sealed). Written by the writer only while the region is active.
	used int64
	// keys lists the index keys of the chunks written to the region (a key
	// no longer indexed here is skipped when the region goes).
	keys []uint64
	// hdrs holds the region's record headers, back to back, while it is
	// active or when it was recovered without a footer; footOff/footLen
	// locate them on disk otherwise.
	hdrs             []byte
	nhdrs            int
	footOff, footLen int64
	active           bool  // the writer appends to it
	dead             bool  // evicted or dropped: no new reads
	refs             int   // reads in flight; the fd closes at dead && refs == 0
	pinnedUntil      int64 // unix ns: not evicted before (lookup pins)
	live             int   // chunks indexed in the region
}

// Tier is the disk tier: the chunks the shared-memory tier evicted, in
// region files under Config.Dir. All methods are safe for concurrent use.
// Create it with Open; Close it after the store that offloads into it.
type Tier struct {
	cfg    Config
	log    *slog.Logger
	direct bool
	lock   *os.File
	bufs   *bufPool // read buffers
	wbufs  *bufPool // record buffers
	faults faults

	mu       sync.Mutex
	closed   bool
	idx      map[uint64]loc
	pending  map[uint64]*record // queued or being written
	queue    []*record
	queued   int64 // bytes of queued records
	regions  map[uint32]*region
	order    []uint32 // region seqs, oldest first
	nextSeq  uint32
	nsIDs    map[string]uint16
	nsNames  []string
	bytes    int64 // payload bytes indexed (on disk)
	degraded error // why offloads stop; nil when healthy
	retryAt  int64 // unix ns: when a degraded tier tries again
	hotCur   map[uint64]struct{}
	hotPrev  map[uint64]struct{}
	st       counters
	dirInode uint64

	idle *sync.Cond // on mu: broadcast when the writer finished a batch

	kick     chan struct{}
	flushNow chan struct{} // Flush: the writer stops gathering
	stop     chan struct{}
	done     chan struct{}
	syncq    chan *region  // sealed regions for the syncer; closed after the writer exits
	syncDone chan struct{} // closed when the syncer exits
	qlen     atomic.Int64
}

// record is a chunk copied out of shared memory, on its way to disk.
type record struct {
	key  uint64
	h    recHeader
	ns   uint16
	buf  []byte // aligned: header, payload, zero padding
	refs int    // the writer's, and readers'; guarded by Tier.mu
	gone bool   // removed while queued: not indexed when written
	read bool   // read from the queue: indexed as read (locRead)
}

// Open opens (or creates) the tier in cfg.Dir and indexes the regions it
// finds there. It blocks while it reads one footer per sealed region and
// scans the record headers of regions without one (the active region of a
// process that was killed); chunk bytes are verified on read, not here.
func Open(cfg Config) (*Tier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot open disk tier: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("cannot create disk tier directory %q: %w", cfg.Dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(cfg.Dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("cannot open disk tier lock: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("cannot lock disk tier directory %q (another node uses it?): %w", cfg.Dir, err)
	}
	t := &Tier{
		cfg: cfg, log: cfg.Logger, lock: lock,
		bufs:     newBufPool(cfg.ReadBufferBytes),
		wbufs:    newBufPool(cfg.QueueBytes),
		idx:      make(map[uint64]loc),
		pending:  make(map[uint64]*record),
		regions:  make(map[uint32]*region),
		nsIDs:    make(map[string]uint16),
		hotCur:   make(map[uint64]struct{}),
		hotPrev:  make(map[uint64]struct{}),
		kick:     make(chan struct{}, 1),
		flushNow: make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		syncq:    make(chan *region, syncBacklog),
		syncDone: make(chan struct{}),
		st:       newCounters(),
	}
	t.idle = sync.NewCond(&t.mu)
	switch cfg.DirectIO {
	case DirectOff:
	case DirectOn:
		if !probeDirect(cfg.Dir) {
			lock.Close()
			return nil, fmt.Errorf("cannot open disk tier: %w: the filesystem of %q refuses O_DIRECT", ErrInvalid, cfg.Dir)
		}
		t.direct = true
	default:
		t.direct = probeDirect(cfg.Dir)
		if !t.direct {
			t.log.Warn("the disk tier's filesystem refuses O_DIRECT; using buffered I/O", "dir", cfg.Dir)
		}
	}
	t.dirInode = inode(cfg.Dir)
	if err := t.recover(); err != nil {
		lock.Close()
		return nil, err
	}
	go t.writer()
	go t.syncer()
	return t, nil
}

// inode is the inode number of path, 0 when it cannot be stat'ed.
func inode(path string) uint64 {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0
	}
	return st.Ino
}

// Direct reports whether the tier uses O_DIRECT.
func (t *Tier) Direct() bool { return t.direct }

// Close stops accepting offloads, writes what is queued, seals the active
// region (its footer, so that the next Open reads one footer instead of
// scanning) and closes every file. It blocks until the writer has exited
// and every sealed region is synced; reads in flight finish first.
// Idempotent.
func (t *Tier) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	close(t.stop)
	<-t.done
	close(t.syncq)
	<-t.syncDone
	t.mu.Lock()
	for _, r := range t.regions {
		r.dead = true
		t.closeRegion(r)
	}
	t.mu.Unlock()
	return t.lock.Close()
}

// closeRegion closes r's file once r is dead and unread. mu held.
func (t *Tier) closeRegion(r *region) {
	if r.dead && r.refs == 0 && r.fd >= 0 {
		_ = unix.Close(r.fd)
		r.fd = -1
	}
}

// key is the index key of (ns, id).
func key(ns string, id store.ID) uint64 {
	var b [maxNS + 1 + store.IDSize]byte
	n := copy(b[:maxNS], ns)
	b[n] = 0
	n += 1 + copy(b[n+1:], id[:])
	return xxhash.Sum64(b[:n])
}

// intern returns ns's number, adding it; false when 65536 are known. mu held.
func (t *Tier) intern(ns string) (uint16, bool) {
	if n, ok := t.nsIDs[ns]; ok {
		return n, true
	}
	if len(t.nsNames) > 0xffff {
		return 0, false
	}
	n := uint16(len(t.nsNames))
	t.nsNames = append(t.nsNames, ns)
	t.nsIDs[ns] = n
	return n, true
}

// Contains reports whether the tier holds the chunk: on disk or queued for
// it. It trusts the 64-bit key of (ns, id): a different chunk with the same
// key (odds 2^-64 a pair) answers true, and its read is a miss, since the
// record's header names the chunk in full. Never blocks on I/O.
func (t *Tier) Contains(ns string, id store.ID) bool {
	k := key(ns, id)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.has(k)
}

// Pin reports whether the tier holds the chunk, like Contains, for a
// lookup: the chunk is marked used as a read marks it (its region's
// eviction writes it again: the get that follows a lookup finds it even
// when the region goes in between), and its region is kept from eviction
// until until (unix ns; 0 pins nothing). Never blocks on I/O.
func (t *Tier) Pin(ns string, id store.ID, until int64) bool {
	k := key(ns, id)
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.idx[k]; ok {
		if r := t.regions[l.region]; r != nil {
			r.pinnedUntil = max(r.pinnedUntil, until)
		}
		l.hlen |= locRead
		t.idx[k] = l
		return true
	}
	r, ok := t.pending[k]
	if ok {
		r.read = true
	}
	return ok
}

// Remove drops the chunk; it reports whether the tier held it. Reads in
// flight finish with the bytes they read. Never blocks on I/O.
func (t *Tier) Remove(ns string, id store.ID) bool {
	k := key(ns, id)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.removeKey(k)
}

// index records that chunk k's record is at l. mu held.
func (t *Tier) index(k uint64, l loc) {
	if old, ok := t.idx[k]; ok {
		t.unindex(k, old)
	}
	t.idx[k] = l
	t.bytes += int64(l.size)
	if r := t.regions[l.region]; r != nil {
		r.keys = append(r.keys, k)
		r.live++
	}
}

// unindex drops k, indexed at l, from the index. mu held.
func (t *Tier) unindex(k uint64, l loc) {
	delete(t.idx, k)
	t.bytes -= int64(l.size)
	if r := t.regions[l.region]; r != nil {
		r.live--
	}
}

// removeKey drops k from the index or the queue. mu held.
func (t *Tier) removeKey(k uint64) bool {
	if l, ok := t.idx[k]; ok {
		t.unindex(k, l)
		return true
	}
	if r, ok := t.pending[k]; ok {
		r.gone = true
		delete(t.pending, k)
		return true
	}
	return false
}

// DropNamespace drops every chunk of ns and returns how many and their
// payload bytes. It walks the index under the mutex: an admin call.
func (t *Tier) DropNamespace(ns string) (chunks, bytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nsIDs[ns]
	if !ok {
		return 0, 0
	}
	for k, l := range t.idx {
		if l.ns == n {
			chunks++
			bytes += int64(l.size)
			t.removeKey(k)
		}
	}
	for k, r := range t.pending {
		if r.ns == n {
			chunks++
			bytes += int64(r.h.size)
			t.removeKey(k)
		}
	}
	return chunks, bytes
}

// Health is nil while the tier offloads, or an error wrapping ErrDegraded
// that says why it stopped (a full disk, an I/O error, its directory
// gone). It stats the directory (one syscall): a directory deleted or
// replaced under the tier degrades it. Never blocks otherwise.
func (t *Tier) Health() error {
	gone := inode(t.cfg.Dir) != t.dirInode
	t.mu.Lock()
	defer t.mu.Unlock()
	if gone && t.degraded == nil && !t.closed {
		t.degradeLocked(fmt.Errorf("directory %q was deleted or replaced", t.cfg.Dir))
	}
	return t.degraded
}

// degradeLocked stops offloads for RetryAfter because of cause. mu held.
func (t *Tier) degradeLocked(cause error) {
	first := t.degraded == nil
	t.degraded = fmt.Errorf("%w: %w", ErrDegraded, cause)
	t.retryAt = t.cfg.Now().Add(t.cfg.RetryAfter).UnixNano()
	t.st.degradations++
	if first {
		t.log.Error("disk tier degraded: offloads stop, what it holds is still served", "err", cause,
			"retry_in", t.cfg.RetryAfter)
	}
}
