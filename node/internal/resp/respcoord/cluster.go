package respcoord

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/resp"
	"github.com/kvring/kvring/node/membership"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// respSchema is the schema of every namespace the Redis-protocol port
// creates: a value per key, placed with its siblings (two chunks per group:
// a key and its metadata).
func respSchema() *kvringv1.NamespaceSchema {
	return &kvringv1.NamespaceSchema{Model: "redis-protocol values", Layout: "resp", HashScheme: "sha256(key)",
		TokensPerChunk: 1, ChunksPerGroup: 2}
}

// Config is what a Cluster is built from. Every field is required unless
// it says otherwise; the node's Start fills them.
type Config struct {
	// Coord runs the port's writes, lookups, reads, removals and
	// namespace registrations.
	Coord *coord.Coordinator
	// Registry is the node's namespace registry.
	Registry *namespace.Registry
	// Store is the node's store: Kept asks it whether it holds a key.
	Store *store.Store
	// Members, Ring, Draining and Unsettled are the node's membership view
	// (none may block).
	Members   func() []membership.Member
	Ring      func() *ring.Ring
	Draining  func(id string) bool
	Unsettled func() bool
	// Replicas is the node's default replication: the most owners a slot
	// lists. Values below 1 count as 1.
	Replicas int
	// Credentials are what AUTH checks tokens against.
	Credentials Credentials
	// AdminActions gives anonymous clients the admin rights (FLUSHDB) when
	// no admin token is configured (node.Config.AdminActions).
	AdminActions bool
	// Metrics counts what the port's lookups could not pin.
	Metrics *metrics.Set
	// Logger is where a SCAN that skips a member is logged.
	Logger *slog.Logger
}

// Cluster serves the Redis-protocol port's calls in process, through
// the coordinator: the same two-phase write, lookups and reads with owner
// fallback as a gRPC engine's calls. It implements resp.Cluster; safe for
// concurrent use.
type Cluster struct {
	respAccess
	coord *coord.Coordinator
	reg   *namespace.Registry
	st    *store.Store
	self  string
	log   *slog.Logger
	m     *metrics.Set
	// lookups bounds the lookups one Held call runs at once.
	lookups int
	places  slotPlaces
	members func() []membership.Member
	ring    func() *ring.Ring
	// draining, replicas: as the coordinator sees them.
	draining func(id string) bool
	replicas int

	// unsettled reports whether the ring changed moments ago.
	unsettled func() bool

	namespaces nsCache

	mu      sync.Mutex
	table   *resp.SlotTable
	tableV  string    // what table was built from (ring epoch, members' ports and drains)
	tableAt time.Time // when that was last checked
}

// New returns the Cluster of cfg. It does no I/O.
func New(cfg Config) *Cluster {
	return &Cluster{respAccess: respAccess{creds: cfg.Credentials, adminActions: cfg.AdminActions}, coord: cfg.Coord,
		reg: cfg.Registry, st: cfg.Store, self: cfg.Store.NodeID(), log: cfg.Logger, m: cfg.Metrics, lookups: 16,
		members: cfg.Members, ring: cfg.Ring, draining: cfg.Draining, unsettled: cfg.Unsettled, replicas: max(1, cfg.Replicas)}
}

var _ resp.Cluster = (*Cluster)(nil)

func (r *Cluster) Anonymous() (resp.Access, bool)                 { return r.anonymous() }
func (r *Cluster) Authenticate(token string) (resp.Access, error) { return r.authenticate(token) }

// Namespace returns the registered namespace name, registering it first
// when create is set. Past the node's namespace limit the error wraps
// resp.ErrNamespaceLimit (the port then writes to its default namespace).
func (r *Cluster) Namespace(ctx context.Context, name string, create bool) (resp.Namespace, error) {
	rec := r.reg.Get(name)
	if rec == nil {
		var err error
		// A read (!create) checks with a few members and registers nothing.
		rec, _, err = r.coord.RegisterNamespace(ctx, &kvringv1.RegisterNamespaceRequest{Name: name, Schema: respSchema()}, !create)
		switch {
		case !create && errors.Is(err, transfer.ErrUnknownNamespace):
			return resp.Namespace{}, resp.ErrNoNamespace
		case errors.Is(err, namespace.ErrTooManyNamespaces):
			return resp.Namespace{}, fmt.Errorf("%w: %w", resp.ErrNamespaceLimit, err)
		case err != nil:
			return resp.Namespace{}, err
		}
	}
	return r.namespaces.of(rec), nil
}

// Slots is the slot table of the current ring, rebuilt when the ring, a
// member's Redis-protocol address or a drain changes: at once for a new
// ring epoch, otherwise seen within slotsRecheck (drains and addresses
// travel by gossip anyway). While the ring settles after a change the
// table says so (resp.SlotTable.Unsettled).
func (r *Cluster) Slots() *resp.SlotTable {
	rg := r.ring()
	if rg == nil {
		return &resp.SlotTable{Self: -1}
	}
	now := time.Now()
	r.mu.Lock()
	t := r.table
	fresh := t != nil && t.Epoch == rg.Epoch() && now.Sub(r.tableAt) < slotsRecheck
	r.mu.Unlock()
	if !fresh {
		t = r.rebuildSlots(rg, now)
	}
	if u := r.unsettled(); u != t.Unsettled {
		cp := *t
		cp.Unsettled = u
		return &cp
	}
	return t
}

// slotsRecheck is how often Slots looks for drains and address changes
// within one ring epoch.
const slotsRecheck = 250 * time.Millisecond

// rebuildSlots builds the slot table of rg unless what it is built from is
// unchanged.
func (r *Cluster) rebuildSlots(rg *ring.Ring, now time.Time) *resp.SlotTable {
	var peers []slotPeer
	var v strings.Builder
	v.WriteString(strconv.FormatUint(rg.Epoch(), 10))
	live := map[string]bool{}
	for _, m := range rg.Members() {
		live[m.ID] = true
	}
	for _, m := range r.members() {
		if !live[m.ID] {
			continue
		}
		d := r.draining(m.ID)
		peers = append(peers, slotPeer{id: m.ID, respAddr: m.RESPAddr, draining: d})
		fmt.Fprintf(&v, " %s=%s/%t", m.ID, m.RESPAddr, d)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.table == nil || r.tableV != v.String() {
		r.table, r.tableV = buildSlotTable(rg, r.self, r.replicas, peers), v.String()
	}
	r.tableAt = now
	return r.table
}

// SlotPlace is the placement key of slot s in the namespace named name
// (slotPlaceKey).
func (r *Cluster) SlotPlace(name string, s uint16) store.ID {
	rg := r.ring()
	if rg == nil || rg.Len() == 0 {
		return store.ID{} // no ring: the write fails as unavailable anyway
	}
	return r.places.get(rg, name, s)
}

// runs are the group runs of keys: each key placed by its placement key.
func runs(keys []resp.Key) []*kvringv1.GroupRun {
	out := make([]*kvringv1.GroupRun, len(keys))
	for i, k := range keys {
		out[i] = &kvringv1.GroupRun{Key: k.Place[:], Count: 1}
	}
	return out
}

func ids(keys []resp.Key) [][]byte {
	out := make([][]byte, len(keys))
	for i := range keys {
		out[i] = keys[i].ID[:]
	}
	return out
}

// Publish checksums the blobs (those Fill did not) and runs the coordinator's two-phase write.
func (r *Cluster) Publish(ctx context.Context, ns resp.Namespace, keys []resp.Key, blobs []*store.Blob) ([]*kvringv1.PutChunkResult, error) {
	refs := make([]*kvringv1.ChunkRef, len(keys))
	for i, b := range blobs {
		sum, summed := b.Sum() // store.Blob.Fill checksummed it as it arrived
		if !summed {
			var err error
			if sum, err = b.Checksum(); err != nil {
				return nil, err
			}
		}
		refs[i] = &kvringv1.ChunkRef{Id: keys[i].ID[:], Size: uint64(b.Size()), Crc32C: sum, Name: []byte(keys[i].Name)}
	}
	_, res, err := r.coord.Publish(ctx, &kvringv1.PutBegin{Namespace: ns.Ref, Chunks: refs, Groups: runs(keys)}, blobs)
	if err != nil {
		return nil, err
	}
	out := make([]*kvringv1.PutChunkResult, len(keys))
	for _, x := range res {
		if i := int(x.GetIndex()); i < len(out) {
			out[i] = x
		}
	}
	for i, x := range out {
		if x == nil {
			return nil, fmt.Errorf("BUG: no result for chunk %d of %d", i, len(keys))
		}
	}
	return out, nil
}

// Kept reports whether a write of k would change nothing: its namespace
// keeps one copy of a chunk (replication 1), this node is the key's write
// owner on the current ring and holds it sealed; sum is the held bytes'
// CRC-32C (0 when only the disk tier holds it). Never blocks for long (the
// registry, the ring and the store's index).
func (r *Cluster) Kept(k resp.Key) (sum uint32, kept bool) {
	rec := r.reg.Get(k.Namespace)
	if rec == nil || rec.GetReplicationFactor() > 1 {
		return 0, false
	}
	rg := r.ring()
	if rg == nil {
		return 0, false
	}
	owners := r.coord.Owners(rg, rec.GetName(), k.Place[:], 1)
	if len(owners) != 1 || owners[0].ID != r.self {
		return 0, false
	}
	ns := namespace.StoreName(rec.GetName(), rec.GetFingerprint())
	if sum, ok := r.st.HeldChecksum(ns, k.ID); ok {
		return sum, true
	}
	return 0, r.st.Contains(ns, k.ID)
}

// Known returns the namespace name when this node's registry knows it.
func (r *Cluster) Known(name string) (resp.Namespace, bool) {
	rec := r.reg.Get(name)
	if rec == nil {
		return resp.Namespace{}, false
	}
	return r.namespaces.of(rec), true
}

// Held asks a lookup per key (a lookup counts a held prefix; these keys are
// unrelated), at most r.lookups at once; a key not held that a member which
// did not answer may hold is an error (coord.LookupChecked). With lease,
// the holders pin what they report for that long. One key (an EXISTS of one
// key, LMCache's walk) is asked on the caller's goroutine: a goroutine of
// its own would add two hand-offs to the lookup's path.
func (r *Cluster) Held(ctx context.Context, ns resp.Namespace, keys []resp.Probe, lease time.Duration) ([]bool, error) {
	out := make([]bool, len(keys))
	if len(keys) == 1 {
		var err error
		out[0], err = r.probe(ctx, ns, keys[0], lease)
		return out, err
	}
	errs := make([]error, len(keys))
	sem := make(chan struct{}, r.lookups)
	var wg sync.WaitGroup
	for i := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i], errs[i] = r.probe(ctx, ns, keys[i], lease)
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// probe asks one lookup whether p's key is held with its siblings. With
// lease, a holder that could not pin (its pinned-bytes budget is spent) or
// did not answer is asked again without a lease: a key that is held
// counts, unpinned.
func (r *Cluster) probe(ctx context.Context, ns resp.Namespace, p resp.Probe, lease time.Duration) (bool, error) {
	k := append([]resp.Key{p.Key}, p.Pin...)
	held, err := r.held(ctx, ns, k, lease)
	if err != nil && lease > 0 {
		held, err = r.held(ctx, ns, k, 0)
		if held {
			r.m.RESPUnpinned.Inc()
		}
	}
	return held, err
}

// held asks one lookup whether k[0] and its siblings (k[1:]) are held: a
// key counts only with its whole sibling group (a metadata key whose
// kv_bytes is gone cannot be read as LMCache reads it). With lease, the
// holders pin the group for that long; a lease that pinned part of a group
// is released at once. An error when a member that may hold the group did
// not answer.
func (r *Cluster) held(ctx context.Context, ns resp.Namespace, k []resp.Key, lease time.Duration) (bool, error) {
	req := &kvringv1.LookupRequest{Namespace: ns.Ref, Ids: ids(k), Groups: runs(k), PinTtlMs: uint32(max(lease, 0) / time.Millisecond)}
	res, unanswered, err := r.coord.LookupChecked(ctx, req)
	switch {
	case err != nil:
		return false, err
	case int(res.GetHeld()) == len(k):
		return true, nil
	}
	if res.GetLeaseId() != 0 {
		r.coord.ReleaseLease(context.WithoutCancel(ctx), res.GetLeaseId())
	}
	return false, unanswered
}

// Get reads keys through the coordinator's GetChunks in process: each
// chunk's bytes are gathered into a buffer of its own (the coordinator has
// verified the bytes), handed to each to keep. A chunk the coordinator
// answers UNAVAILABLE for is an error, and so is every chunk not answered
// when the call fails: never a miss.
func (r *Cluster) Get(ctx context.Context, ns resp.Namespace, keys []resp.Key, each func(i int, data []byte, err error) error) error {
	s := &getSink{n: len(keys), each: each, cur: -1}
	err := r.coord.GetChunks(ctx, &kvringv1.GetRequest{Namespace: ns.Ref, Ids: ids(keys), Groups: runs(keys)}, s)
	if ferr := s.finish(); err == nil {
		err = ferr
	}
	if err == nil && s.next < s.n {
		err = fmt.Errorf("%w: the read ended after %d of %d keys", transfer.ErrUnavailable, s.next, s.n)
	}
	s.rest(err)
	return err
}

// Delete removes keys from every member, lookup leases notwithstanding
// (coord.Remove). A member that predates that keeps a key pinned by a
// lease until the lease ends: an error wrapping ErrUnavailable says so
// (after the other keys were removed).
func (r *Cluster) Delete(ctx context.Context, ns resp.Namespace, keys []resp.Key) ([]bool, error) {
	rm, err := r.coord.Remove(ctx, ns.Ref, ids(keys))
	if err != nil {
		return nil, err
	}
	pinned := 0
	for _, p := range rm.Pinned {
		if p {
			pinned++
		}
	}
	if pinned > 0 {
		return rm.Removed, fmt.Errorf("%w: %d of the keys are pinned by a lookup lease and stay until it ends", transfer.ErrUnavailable, pinned)
	}
	return rm.Removed, nil
}

// Scan pages through the key names members hold: the cursor's top 8 bits
// are the member (an index into the ring's members, sorted by id; always 0
// with local), the other 56 the first 7 bytes of the next chunk id to list
// on it. A member's pages follow each other until it has no more; then the
// next member's start. A member that does not answer is skipped (logged):
// its keys cannot be read now either. A ring change during a scan may skip
// or repeat keys, as a Redis rehash may repeat them.
func (r *Cluster) Scan(ctx context.Context, cursor uint64, count int, local bool) ([][]byte, uint64, error) {
	rg := r.ring()
	var members []ring.Member
	if local {
		members = []ring.Member{{ID: r.self}}
	} else if rg != nil {
		members = rg.Members()
	}
	var names [][]byte
	for idx := int(cursor >> 56); idx < len(members) && len(names) < count; idx++ {
		var from []byte
		if low := cursor & (1<<56 - 1); low != 0 {
			from = binary.BigEndian.AppendUint64(nil, low<<8)[:7]
		}
		page, next, err := r.coord.ListKeys(ctx, members[idx], resp.NamespacePrefix, from, count-len(names))
		if err != nil && (local || ctx.Err() != nil) {
			return nil, 0, fmt.Errorf("cannot list the keys of node %s: %w", members[idx].ID, err)
		}
		if err != nil { // its keys cannot be read now either: the scan goes on without them
			r.log.Warn("SCAN skips a member that did not answer", "component", "resp", "member", members[idx].ID, "err", err)
			next = nil
		}
		names = append(names, page...)
		if next != nil {
			return names, uint64(idx)<<56 | binary.BigEndian.Uint64(append(next[:7:7], 0))>>8, nil
		}
		cursor = uint64(idx+1) << 56
	}
	if int(cursor>>56) >= len(members) {
		cursor = 0
	}
	return names, cursor, nil
}

// Flush drops every RESP namespace this node knows from every member.
func (r *Cluster) Flush(ctx context.Context) (int, error) {
	n := 0
	var errs []error
	for _, rec := range r.reg.List() {
		if !strings.HasPrefix(rec.GetName(), resp.NamespacePrefix) {
			continue
		}
		if _, err := r.coord.DropEverywhere(ctx, &kvringv1.NamespaceRef{Name: rec.GetName(), Fingerprint: rec.GetFingerprint()}); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
