package owner

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/spread"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// Config configures an Owner. Every field is required unless it says
// otherwise.
type Config struct {
	Store    Store
	Log      *slog.Logger
	Registry *namespace.Registry
	// Epoch is the node's current ring epoch, carried in replies.
	Epoch func() uint64
	// MaxBatch is the most chunks one call may carry.
	MaxBatch int
	// MaxPin caps the pin a lookup lease may take.
	MaxPin time.Duration
	// Now is the clock of pin-lease records; it must be the store's clock
	// (store.Config.Now), so both agree on when a lease ends.
	Now func() time.Time
	// Metrics receives the Peer service's measurements.
	Metrics *metrics.Set
	// Counter counts lookups per group (Lookup) to find hot groups.
	// Optional: nil counts nothing.
	Counter *spread.Counter
	// Spread records the groups this node keeps spread copies of (a
	// spreading prepare) and answers their width to lookups. Optional: nil
	// keeps no records and answers no widths.
	Spread *spread.Table
	// Placed is told, as a prepare stages chunks (not spread copies), the
	// namespace's name, store name and replication, the chunks' ring keys
	// (their group keys, or ids) and their ids: the hand-off's summary
	// names the partitions this node holds chunks of without owning them
	// (handoff.Mover.Placed). It must not block or keep the slices.
	// Optional.
	Placed func(name, ns string, replicas int, keys [][]byte, ids []store.ID)
	// Load counts the peer read calls this node serves (Has, Fetch), for
	// the load hint its answers carry. Optional: nil counts nothing and
	// hints 0.
	Load *spread.Meter
}

// Owner is this node's side of the Peer service: it stages, seals, pins and
// serves chunks of its local store on behalf of coordinators (this node's
// own, in process, included). It keeps the Staged handle of every chunk voted
// ready under a stage token until Commit or Abort; the store alone decides
// when a stage lease ends (Sweep forgets the handles whose lease it ended).
// Safe for concurrent use.
type Owner struct {
	cfg      Config
	st       Store
	maxChunk int64

	mu     sync.Mutex
	staged map[uint64]stagedChunk // by stage token: random, bound to its caller
	pins   map[uint64]leasePins   // coordinator lease id → local pins
}

type stagedChunk struct {
	w      *store.Staged
	id     store.ID
	ns     string
	caller string // the only caller that may commit or abort it (Prepare.caller)
}

type leasePins struct {
	pins    []store.PinID
	expires time.Time
	// coordinator is the node id of the coordinator that granted the lease
	// (PeerCaller.node_id); "" for this node's own.
	coordinator string
}

// New returns an Owner over cfg.Store. It does no I/O.
func New(cfg Config) *Owner {
	return &Owner{cfg: cfg, st: cfg.Store, maxChunk: cfg.Store.MaxChunkSize(),
		staged: make(map[uint64]stagedChunk), pins: make(map[uint64]leasePins)}
}

// randomUint64 returns a random non-zero number.
func randomUint64() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// NewLeaseID returns a random non-zero lookup lease id.
func NewLeaseID() uint64 { return randomUint64() }

// Epoch is the node's current ring epoch.
func (o *Owner) Epoch() uint64 { return o.cfg.Epoch() }

// MaxChunk is the largest chunk the store accepts.
func (o *Owner) MaxChunk() int64 { return o.maxChunk }

// register keeps a READY chunk until its caller commits or aborts it and
// returns its token: 64 random bits, so a token can be neither guessed nor
// named by another caller, nor survive a restart into a new chunk.
func (o *Owner) register(ns string, id store.ID, w *store.Staged, caller string) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	for {
		tok := randomUint64()
		if _, taken := o.staged[tok]; !taken {
			o.staged[tok] = stagedChunk{w: w, id: id, ns: ns, caller: caller}
			return tok
		}
	}
}

// take removes and returns the chunk staged under token for caller. A
// token of another caller is left in place and reported unknown.
func (o *Owner) take(token uint64, caller string) (stagedChunk, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	sc, ok := o.staged[token]
	if !ok || sc.caller != caller {
		return stagedChunk{}, false
	}
	delete(o.staged, token)
	return sc, ok
}

// Commit seals the chunks of the given tokens for caller (the one their
// prepare ran for: another caller's token is unknown). A token already
// committed (a retry) reports sealed when the chunk is held; a token whose
// lease the store ended reports failed and is forgotten. Blocks on the
// catalog's group commit when something was sealed. A chunk whose catalog
// record cannot be written is reported failed, never sealed (a restart
// would lose it), and is evicted again unless a reader has pinned it.
func (o *Owner) Commit(caller string, ref *kvringv1.NamespaceRef, chunks []*kvringv1.StagedChunk) []*kvringv1.CommitResult {
	res := make([]*kvringv1.CommitResult, len(chunks))
	var sealed []int
	var ns string
	if ref != nil {
		ns = namespace.StoreName(ref.GetName(), ref.GetFingerprint()) // once per call, not per chunk
	}
	for i, c := range chunks {
		var ok bool
		if res[i], ok = o.commitOne(caller, ref, ns, c); ok {
			sealed = append(sealed, i)
		}
	}
	if len(sealed) > 0 {
		// Group commit: what this call sealed is in the catalog before the
		// coordinator hears "sealed", so a chunk reported stored survives a
		// crash of this process (the bytes are in shared memory already).
		// Concurrent commits share one bbolt transaction.
		if err := o.st.FlushCatalog(); err != nil {
			o.cfg.Log.Error("commit: chunks whose catalog records cannot be written are reported failed", "chunks", len(sealed), "err", err)
			for _, i := range sealed {
				id, _ := store.ParseID(chunks[i].GetId())
				_ = o.st.Evict(ns, id) // a pinned chunk stays held (its record lands with the next write)
				res[i] = failed(err, "the chunk's catalog record cannot be written, so a restart would lose it: "+err.Error())
			}
		}
	}
	return res
}

// commitOne seals one staged chunk; sealed reports that this call sealed it.
// ns is ref's store name ("" when ref is nil).
func (o *Owner) commitOne(caller string, ref *kvringv1.NamespaceRef, ns string, c *kvringv1.StagedChunk) (r *kvringv1.CommitResult, sealed bool) {
	id, idErr := store.ParseID(c.GetId())
	sc, ok := o.take(c.GetStageToken(), caller)
	if ok && (idErr != nil || ref == nil || sc.id != id || sc.ns != ns) {
		// The token names another chunk: never seal what was not asked for.
		o.mu.Lock()
		o.staged[c.GetStageToken()] = sc
		o.mu.Unlock()
		return failed(transfer.ErrInvalidArgument, fmt.Sprintf("stage token %d does not belong to chunk %x of this namespace",
			c.GetStageToken(), c.GetId())), false
	}
	if !ok {
		if idErr == nil && ref != nil && o.st.Contains(ns, id) {
			return &kvringv1.CommitResult{Status: kvringv1.CommitStatus_COMMIT_STATUS_SEALED}, false
		}
		return &kvringv1.CommitResult{Status: kvringv1.CommitStatus_COMMIT_STATUS_FAILED,
			Reason: fmt.Sprintf("unknown stage token %d (its lease expired or it was aborted)", c.GetStageToken())}, false
	}
	switch err := sc.w.Seal(); {
	case err == nil:
		return &kvringv1.CommitResult{Status: kvringv1.CommitStatus_COMMIT_STATUS_SEALED}, true
	case errors.Is(err, store.ErrAlreadyHeld):
		return &kvringv1.CommitResult{Status: kvringv1.CommitStatus_COMMIT_STATUS_SEALED}, false
	default:
		return failed(err, err.Error()), false
	}
}

// failed is a FAILED commit result carrying err's wire code.
func failed(err error, reason string) *kvringv1.CommitResult {
	return &kvringv1.CommitResult{Status: kvringv1.CommitStatus_COMMIT_STATUS_FAILED, Reason: reason, Code: transfer.WireCode(err)}
}

// AbortTokens frees the staged chunks of the given tokens of caller; other
// callers' tokens are ignored.
func (o *Owner) AbortTokens(caller string, tokens []uint64) {
	for _, t := range tokens {
		if sc, ok := o.take(t, caller); ok {
			sc.w.Abort()
		}
	}
}

// AbortCaller frees every chunk staged for caller and not yet committed:
// its connection ended, so no commit can come (a token is bound to the
// connection's address, which a new connection does not reuse). Without it
// the slots would wait out the store's stage lease, and a put of the same
// chunks meanwhile would wait for a write that never ends.
func (o *Owner) AbortCaller(caller string) {
	if caller == "" {
		return
	}
	o.mu.Lock()
	var gone []stagedChunk
	for tok, sc := range o.staged {
		if sc.caller == caller {
			gone = append(gone, sc)
			delete(o.staged, tok)
		}
	}
	o.mu.Unlock()
	for _, sc := range gone {
		sc.w.Abort()
	}
}

// Has answers which ids are held, pinning them under the coordinator's lease
// id when pin is set, charged to client's share of the pinned bytes (package
// tenant names clients; "": no share).
func (o *Owner) Has(client string, ref *kvringv1.NamespaceRef, rawIDs [][]byte, pin *kvringv1.LeasePin) ([]bool, time.Duration, error) {
	return o.hasFrom("", client, ref, rawIDs, pin)
}

// hasFrom is Has for a lease granted by the coordinator with node id coord
// ("": this node's own), whose pins CoordinatorGone ends.
func (o *Owner) hasFrom(coord, client string, ref *kvringv1.NamespaceRef, rawIDs [][]byte, pin *kvringv1.LeasePin) ([]bool, time.Duration, error) {
	if ref == nil || ref.GetName() == "" {
		return nil, 0, fmt.Errorf("%w: namespace is required", transfer.ErrInvalidArgument)
	}
	ids, err := ParseIDs(rawIDs, o.cfg.MaxBatch) // a caller may not pin more than one call's chunks at once
	if err != nil {
		return nil, 0, err
	}
	var ttl time.Duration
	if pin != nil && pin.GetLeaseId() != 0 {
		ttl = min(time.Duration(pin.GetTtlMs())*time.Millisecond, o.cfg.MaxPin)
	}
	held, p, err := o.st.HasFor(client, namespace.StoreName(ref.GetName(), ref.GetFingerprint()), ids, ttl)
	if err != nil {
		return nil, 0, err
	}
	if p != 0 {
		o.mu.Lock()
		lp := o.pins[pin.GetLeaseId()]
		lp.pins = append(lp.pins, p)
		lp.expires = o.cfg.Now().Add(ttl)
		lp.coordinator = coord
		o.pins[pin.GetLeaseId()] = lp
		o.mu.Unlock()
	}
	return held, ttl, nil
}

// Staging reports for every id not held whether a write of it is staged on
// this node now. ids were checked by Has.
func (o *Owner) Staging(ref *kvringv1.NamespaceRef, rawIDs [][]byte, held []bool) []bool {
	ns := namespace.StoreName(ref.GetName(), ref.GetFingerprint())
	out := make([]bool, len(rawIDs))
	for i, raw := range rawIDs {
		if i < len(held) && !held[i] && len(raw) == len(store.ID{}) {
			out[i] = o.st.Staging(ns, store.ID(raw))
		}
	}
	return out
}

// Unpin ends the local pins taken under coordinator leases.
func (o *Owner) Unpin(leases []uint64) {
	for _, l := range leases {
		o.mu.Lock()
		lp := o.pins[l]
		delete(o.pins, l)
		o.mu.Unlock()
		for _, p := range lp.pins {
			o.st.Release(p)
		}
	}
}

// CoordinatorGone ends the pins of every lease granted by the coordinator
// with node id coord, and reports how many leases that was. The node calls
// it once gossip has declared that node dead, it left, or it restarted
// (membership.Config.OnMemberGone): the leases' records went with its
// process, so nobody would release them before they expire (up to MaxPin).
// It never blocks for long; safe for concurrent use.
func (o *Owner) CoordinatorGone(coord string) int {
	if coord == "" {
		return 0
	}
	var ended []leasePins
	o.mu.Lock()
	for id, lp := range o.pins {
		if lp.coordinator == coord {
			ended = append(ended, lp)
			delete(o.pins, id)
		}
	}
	o.mu.Unlock()
	for _, lp := range ended {
		for _, p := range lp.pins {
			o.st.Release(p)
		}
	}
	return len(ended)
}

// Sweep forgets the stage tokens whose slot the store no longer holds staged
// (its lease ran out: the store freed it) and the records of pin leases that
// have ended (the store released their pins itself). The node's maintenance
// loop calls it; it decides no expiry of its own for staged chunks.
func (o *Owner) Sweep() {
	now := o.cfg.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for t, sc := range o.staged {
		if !sc.w.Live() {
			delete(o.staged, t)
		}
	}
	for l, lp := range o.pins {
		if now.After(lp.expires) {
			delete(o.pins, l)
		}
	}
}

// Tokens reports how many chunks wait for their commit under a stage token.
func (o *Owner) Tokens() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.staged)
}
