package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Reasons a chunk left the store or was refused; used in Stats.
const (
	ReasonPolicy   = "policy"   // the eviction policy declined or evicted it
	ReasonNoSpace  = "no_space" // the budget had no room (staged or pinned bytes)
	ReasonExplicit = "explicit" // removed on request (evict; only tests so far)
	ReasonChecksum = "checksum" // its bytes no longer matched the checksum
	ReasonAborted  = "aborted"  // the writer aborted the staged write
	ReasonExpired  = "expired"  // the stage lease ran out
	ReasonLost     = "lost"     // its memory faulted: its segment file was truncated
)

const (
	reasonNone uint8 = iota
	reasonPolicy
	reasonExplicit
	reasonChecksum
	reasonAborted
	reasonExpired
	reasonRejected
	reasonLost
)

// Store is a node's local chunk tier. Create it with Open; all methods are
// safe for concurrent use.
type Store struct {
	cfg    Config
	log    *slog.Logger
	nodeID string
	cat    *catalog
	pol    policy
	// shmLock holds the lock of the node's segment directory until Close.
	shmLock *os.File

	// gate lets Close wait for calls in flight (enter/exit); closing makes
	// new calls fail fast with ErrClosed.
	gate    sync.RWMutex
	closing atomic.Bool
	// noPrefault is set once the kernel refused MADV_POPULATE_WRITE;
	// noFallocate once the shm filesystem refused fallocate.
	noPrefault  atomic.Bool
	noFallocate atomic.Bool

	mu      sync.Mutex
	closed  bool
	arena   *arena
	idx     index
	nsIDs   map[string]uint32
	nsNames []string
	// nsStats are the counters of each namespace, by number (nsstats.go).
	nsStats []nsCounters
	// shares are the namespace shares, by namespace (share.go); shareMu
	// orders SetShare calls, so the policy gets them in the same order.
	shares  map[string]Share
	shareMu sync.Mutex
	leases  map[uint64]*lease
	nextPin uint64
	st      counters
	staging map[*entry]int64 // entries in stateStaged → lease end (unix ns)
	clients clientShares     // per-client parts of the staged and pinned budgets (client_shares.go)
	blobs   blobCounters     // live blobs (blob.go)
	forgets []uint64         // keys the policy must forget once mu is released
	// offloading counts evicted chunks being copied into the Lower tier
	// (their slots are still allocated); offloaded is signalled, on mu, as
	// each copy ends (lower.go).
	offloading int
	offloaded  *sync.Cond

	stop chan struct{}
	done chan struct{}
}

// counters are the store's running totals, guarded by mu.
type counters struct {
	chunks        int64 // sealed
	payloadBytes  int64 // sealed payload
	stagedChunks  int64
	stagedBytes   int64 // staged payload
	pinnedChunks  int64 // sealed entries with pins > 0
	pinnedBytes   int64 // slot bytes of entries with pins > 0 (sealed or dead)
	evictions     map[string]uint64
	rejections    map[string]uint64
	checksumErrs  uint64
	stages, seals uint64
	gets, hits    uint64
	stageExpired  uint64
	segmentsLost  uint64
	lowerHits     uint64 // reads served by the Lower tier
	promotions    uint64 // chunks copied back from the Lower tier
}

// Open opens (or creates) the store of cfg.DataDir, with cfg's defaults
// filled in and checked by Validate (an invalid cfg is ErrInvalid). If the
// catalog lists chunks whose segments still exist, they are verified and
// served again. Blocks on the disk while it recovers them.
func Open(cfg Config) (*Store, error) { return open(cfg, newPolicy) }

// policyMaker builds a store's eviction policy; onEvict and onReject are the
// store's callbacks.
type policyMaker func(cfg *Config, onEvict evictFunc, onReject func(*entry)) (policy, error)

// evictFunc is the store's eviction callback. With force unset the store
// refuses to evict a pinned chunk and returns false: the policy must keep
// the chunk and its cost (PolicyLRU). With force set (ristretto has already
// dropped the chunk) a pinned chunk is marked evicted and dies when its pins
// end; it returns true.
type evictFunc func(e *entry, force bool) bool

// open is Open with the policy built by makePolicy: newPolicy, or in tests a
// policy whose decisions the test controls.
func open(cfg Config, makePolicy policyMaker) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot open store: %w", err)
	}
	start := time.Now()
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("cannot create data directory %q: %w", cfg.DataDir, err)
	}
	if err := os.MkdirAll(cfg.ShmDir, 0o750); err != nil {
		return nil, fmt.Errorf("cannot create shared-memory directory %q: %w", cfg.ShmDir, err)
	}
	cat, err := openCatalog(cfg.DataDir, cfg.Logger, cfg.Now)
	if err != nil {
		return nil, err
	}
	s := &Store{
		cfg:     cfg,
		log:     cfg.Logger,
		nodeID:  cat.nodeID,
		cat:     cat,
		idx:     newIndex(),
		nsIDs:   make(map[string]uint32),
		shares:  make(map[string]Share),
		leases:  make(map[uint64]*lease),
		staging: make(map[*entry]int64),
		clients: newClientShares(&cfg),
		st: counters{
			evictions:  make(map[string]uint64),
			rejections: make(map[string]uint64),
		},
	}
	s.offloaded = sync.NewCond(&s.mu)
	if err := s.checkShmSize(); err != nil {
		cat.close()
		return nil, fmt.Errorf("cannot open store: %w", err)
	}
	if s.shmLock, err = openNodeShmDir(nodeShmDir(cfg.ShmDir, s.nodeID)); err != nil {
		cat.close()
		return nil, fmt.Errorf("cannot open store: %w", err)
	}
	// What lets a store whose catalog is lost keep its identity, or clean
	// up after it (nodeid.go); a failure costs only that.
	if err := writeNodeIDFile(cfg.DataDir, s.nodeID); err != nil {
		s.log.Warn("cannot keep a copy of the node identity beside the catalog", "err", err)
	}
	if err := markOwner(nodeShmDir(cfg.ShmDir, s.nodeID), cfg.DataDir); err != nil {
		s.log.Warn("cannot mark the segment directory with its data directory", "err", err)
	}
	s.removeOrphans()
	s.arena = newArena(nodeShmDir(cfg.ShmDir, s.nodeID), s.nodeID, cfg.MemoryLimit, cfg.SegmentSize)
	s.arena.onSegment = s.cat.recordSegment
	s.arena.onSkip = func(path string, err error) {
		s.log.Error("a file the store did not create is at the next segment's path; skipping that segment id", "path", path, "err", err)
	}
	pol, err := makePolicy(&cfg, s.policyEvicted, s.policyRejected)
	if err != nil {
		s.shmLock.Close()
		cat.close()
		return nil, err
	}
	s.pol = pol
	s.loadShares()
	recovered, err := s.recover()
	if err != nil {
		pol.close()
		s.arena.close()
		s.shmLock.Close()
		cat.close()
		return nil, err
	}
	s.warnShmFree()
	s.log.Info("store opened", "node", s.nodeID, "shm_dir", cfg.ShmDir, "limit_bytes", cfg.MemoryLimit,
		"recovered_chunks", recovered, "duration", time.Since(start).Round(time.Microsecond))
	if cfg.MaintenanceInterval > 0 {
		s.stop = make(chan struct{})
		s.done = make(chan struct{})
		go s.maintain()
	}
	return s, nil
}

// NodeID is the node identity kept in the catalog; it survives restarts.
func (s *Store) NodeID() string { return s.nodeID }

// Limit is the memory budget in bytes.
func (s *Store) Limit() int64 { return s.cfg.MemoryLimit }

// MaxChunkSize is the largest chunk the store accepts.
func (s *Store) MaxChunkSize() int64 { return s.cfg.MaxChunkSize }

// Close stops the maintenance loop, waits for calls in flight, writes the
// catalog and unmaps the segments, keeping their files so a new Store on the
// same DataDir serves the chunks again (a final catalog write that fails is
// returned, and the chunks whose records it held are not served after a
// restart). Calls after Close return ErrClosed;
// the bytes of Views and Staged slots must not be touched afterwards (they
// are unmapped). Close is idempotent; it blocks until the loop has exited.
func (s *Store) Close() error {
	if s.closing.Swap(true) {
		return nil
	}
	if s.stop != nil {
		close(s.stop)
		<-s.done
	}
	// Wait for calls in flight; later calls see closing and return ErrClosed.
	s.gate.Lock()
	defer s.gate.Unlock()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.pol.close()
	var errs []error
	s.mu.Lock()
	// Staged slots are not in the catalog, so the next Open treats them as
	// free.
	if err := s.cat.flush(); err != nil {
		errs = append(errs, err)
	} else if err := s.cat.fold(); err != nil {
		errs = append(errs, err)
	}
	if err := s.arena.close(); err != nil {
		errs = append(errs, err)
	}
	s.mu.Unlock()
	if err := s.cat.close(); err != nil {
		errs = append(errs, err)
	}
	if err := s.shmLock.Close(); err != nil { // releases the segment directory
		errs = append(errs, err)
	}
	s.log.Info("store closed", "node", s.nodeID)
	return errors.Join(errs...)
}

// key validates the namespace and returns the chunk's key, interning the
// namespace if intern is set (otherwise an unknown namespace returns ok=false).
// Called with mu held.
func (s *Store) key(ns string, id ID, intern bool) (chunkKey, bool, error) {
	n, ok := s.nsIDs[ns]
	if !ok {
		if err := ValidateNamespace(ns); err != nil {
			return chunkKey{}, false, err
		}
		if !intern {
			return chunkKey{}, false, nil
		}
		n = uint32(len(s.nsNames))
		s.nsNames = append(s.nsNames, ns)
		s.nsStats = append(s.nsStats, nsCounters{})
		s.nsIDs[ns] = n
	}
	return chunkKey{ns: n, id: id}, true, nil
}

// kill removes e from the index (if it is there) and frees its slot once no
// reader, writer or pin holds it. It returns whether the caller must tell
// the policy to forget e (after releasing mu). Called with mu held.
func (s *Store) kill(e *entry, reason uint8) (forget bool) {
	switch e.state {
	case stateDead:
		return false
	case stateSealed:
		s.st.chunks--
		s.st.payloadBytes -= int64(e.size)
		s.nsSealed(e, -1)
		if e.pins > 0 {
			s.st.pinnedChunks--
		}
		s.cat.removeChunk(e)
	case stateStaged:
		s.unstage(e)
	}
	s.idx.remove(e)
	e.state = stateDead
	e.reason = reason
	forget = e.policy
	e.policy = false
	s.maybeFree(e)
	return forget
}

// maybeFree returns a dead entry's slot once nothing holds it. mu held.
func (s *Store) maybeFree(e *entry) {
	if s.closed {
		return // the segments are unmapped; the next Open rebuilds the free lists
	}
	if e.state == stateDead && e.hasSlot && e.refs == 0 && e.pins == 0 {
		e.hasSlot = false
		s.arena.free(e.slot)
	}
}

// forgetLater queues e's key for the policy to forget when mu is released
// by unlock. mu held.
func (s *Store) forgetLater(e *entry) { s.forgets = append(s.forgets, e.hash) }

// unlock releases mu, then tells the policy to forget the queued keys
// (ristretto's Del may block on its buffer, whose goroutine takes mu in its
// callbacks). The policy's callbacks release mu with a plain Unlock instead.
func (s *Store) unlock() {
	f := s.forgets
	s.forgets = nil
	s.mu.Unlock()
	for _, h := range f {
		s.pol.forget(h)
	}
}

// policyEvicted is the policy's eviction callback (an evictFunc).
func (s *Store) policyEvicted(e *entry, force bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		// ristretto's Close reports every item it holds as evicted: those
		// chunks stay in the catalog for the next Open.
		return true
	}
	if e.state == stateSealed && e.pins > 0 && !force {
		return false // the policy keeps it
	}
	e.policy = false
	switch e.state {
	case stateStaged:
		e.evicted = true // the seal will refuse it
	case stateSealed:
		if e.pins > 0 {
			e.evicted = true // dies when its pins end
			return true
		}
		if s.cfg.Lower != nil && !s.offloadLocked(e, force) {
			return s.closed || force || e.state != stateSealed
		}
		s.st.evictions[ReasonPolicy]++
		s.nsStats[e.key.ns].evictions++
		s.kill(e, reasonPolicy)
		s.killCompanions(e)
	}
	return true
}

// killCompanions evicts the companions of e (Config.Companions), which the
// policy evicted: sealed ones die now, pinned ones when their pins end.
// mu held.
func (s *Store) killCompanions(e *entry) {
	if s.cfg.Companions == nil || e.name == nil {
		return
	}
	for _, id := range s.cfg.Companions(*e.name) {
		k := chunkKey{ns: e.key.ns, id: id}
		c := s.idx.get(k, k.hash())
		switch {
		case c == nil || c.state != stateSealed:
		case c.pins > 0:
			c.evicted = true // dies when its pins end
		default:
			s.st.evictions[ReasonPolicy]++
			s.nsStats[c.key.ns].evictions++
			if s.kill(c, reasonPolicy) {
				s.forgetLater(c)
			}
		}
	}
}

// policyRejected is the policy's admission-refusal callback.
func (s *Store) policyRejected(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	e.policy = false
	e.rejected = true
	if e.state == stateSealed {
		// Sealed before the decision was collected (a stale record of an
		// earlier copy answered settle): the policy does not know the chunk,
		// so it could never evict it. Drop it like an eviction.
		s.st.evictions[ReasonPolicy]++
		s.kill(e, reasonPolicy)
	}
}
