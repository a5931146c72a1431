package handoff

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/kvring/kvring/node/internal/moves"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/node/internal/chunkcopy"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/spread"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// TestMain runs the package's tests in a scratch directory (testutil.Scratch)
// and fails the package when they leave a goroutine running.
func TestMain(m *testing.M) {
	s := testutil.NewScratch()
	goleak.VerifyTestMain(m, goleak.Cleanup(s.Exit), testutil.IgnoreStarter)
}

// fakePeers is the other members, each a real store: Has pins there,
// Copy stages and seals there, Unpin releases. Members can be made
// unreachable or refusing.
type fakePeers struct {
	mu     sync.Mutex
	stores map[string]*store.Store
	down   map[string]bool
	refuse map[string]bool // member: every copy to it is rejected
	pins   map[uint64][]pinAt
	places map[store.ID]store.ID // placement keys copies carried
}

type pinAt struct {
	st  *store.Store
	pin store.PinID
}

func newFakePeers() *fakePeers {
	return &fakePeers{stores: map[string]*store.Store{}, down: map[string]bool{}, refuse: map[string]bool{},
		pins: map[uint64][]pinAt{}, places: map[store.ID]store.ID{}}
}

func storeNS(rec *kvringv1.NamespaceRecord) string {
	return namespace.StoreName(rec.GetName(), rec.GetFingerprint())
}

func (f *fakePeers) peer(id string) (*store.Store, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[id] {
		return nil, errors.New("connection refused")
	}
	return f.stores[id], nil
}

func (f *fakePeers) Has(_ context.Context, m ring.Member, rec *kvringv1.NamespaceRecord, raw [][]byte, pin *kvringv1.LeasePin) ([]bool, time.Duration, error) {
	st, err := f.peer(m.ID)
	if err != nil {
		return nil, 0, err
	}
	ids := make([]store.ID, len(raw))
	for i, id := range raw {
		ids[i] = store.ID(id)
	}
	ttl := time.Duration(pin.GetTtlMs()) * time.Millisecond
	held, p, err := st.Has(storeNS(rec), ids, ttl)
	if err != nil {
		return nil, 0, err
	}
	if p != 0 {
		f.mu.Lock()
		f.pins[pin.GetLeaseId()] = append(f.pins[pin.GetLeaseId()], pinAt{st, p})
		f.mu.Unlock()
		return held, ttl, nil
	}
	return held, 0, nil
}

func (f *fakePeers) Unpin(_ context.Context, _ ring.Member, leases []uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range leases {
		for _, p := range f.pins[l] {
			p.st.Release(p.pin)
		}
		delete(f.pins, l)
	}
}

func (f *fakePeers) Copy(_ context.Context, m ring.Member, rec *kvringv1.NamespaceRecord, chunks []chunkcopy.Chunk, _ chunkcopy.Spread) []error {
	errs := make([]error, len(chunks))
	st, err := f.peer(m.ID)
	for i, c := range chunks {
		f.mu.Lock()
		refuse := f.refuse[m.ID]
		f.places[c.ID] = c.Place
		f.mu.Unlock()
		switch {
		case err != nil:
			errs[i] = err
		case refuse:
			errs[i] = store.ErrRejected
		default:
			errs[i] = storeBytes(st, storeNS(rec), c.ID, c.View.Bytes(), nil)
		}
	}
	return errs
}

// storeBytes stages, writes and seals one chunk (with a placement key when
// place is set).
func storeBytes(st *store.Store, ns string, id store.ID, data []byte, place *store.ID) error {
	w, err := st.Stage(ns, id, int64(len(data)), store.Checksum(data))
	if err != nil {
		return err
	}
	if place != nil {
		w.SetPlacement(*place)
	}
	if _, err := w.Write(data); err != nil {
		w.Abort()
		return err
	}
	return w.Seal()
}

func (f *fakePeers) held(member string, rec *kvringv1.NamespaceRecord, id store.ID) bool {
	st, _ := f.peer(member)
	return st != nil && st.Contains(storeNS(rec), id)
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(store.Config{DataDir: t.TempDir(), ShmDir: t.TempDir(), MemoryLimit: 16 << 20,
		MaintenanceInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fixture is a Mover for node "a" of a three-member ring, over a real
// store, with two namespaces: "r1" (one replica) and "r2" (two).
type fixture struct {
	m     *Mover
	st    *store.Store
	peers *fakePeers
	rg    *ring.Ring
	recs  map[string]*kvringv1.NamespaceRecord
}

func newFixture(t *testing.T, members ...string) *fixture {
	t.Helper()
	st := openStore(t)
	var ms []ring.Member
	for _, id := range members {
		ms = append(ms, ring.Member{ID: id, Addr: id + ":1"})
	}
	cfg := ring.DefaultConfig()
	cfg.ReplicationFactor = 3 // as a node sets it: namespaces may keep up to three replicas
	rg, err := ring.New(ms, 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := namespace.NewRegistry()
	f := &fixture{st: st, peers: newFakePeers(), rg: rg, recs: map[string]*kvringv1.NamespaceRecord{}}
	for _, id := range members[1:] {
		f.peers.stores[id] = openStore(t)
	}
	for _, ns := range []struct {
		name string
		rf   uint32
	}{{"r1", 1}, {"r2", 2}} {
		fp := sha256.Sum256([]byte(ns.name))
		rec := &kvringv1.NamespaceRecord{Name: ns.name, Fingerprint: fp[:], ReplicationFactor: ns.rf, MinReplicas: 1}
		if _, _, err := reg.Merge(rec); err != nil {
			t.Fatal(err)
		}
		f.recs[ns.name] = rec
	}
	f.m = New(Config{Self: "a", Store: st, Registry: reg, Ring: func() *ring.Ring { return f.rg }, Peers: f.peers,
		Owners: func(rg *ring.Ring, ns string, key []byte, r int) []ring.Member { return rg.Owners(ns, key, r) },
		Rate:   -1, Sweep: -1, Log: slog.New(slog.DiscardHandler)})
	return f
}

// put stores n chunks of ns in a's store and returns their ids.
func (f *fixture) put(t *testing.T, ns string, n int) []store.ID {
	t.Helper()
	rec := f.recs[ns]
	var ids []store.ID
	for i := range n {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(i))
		id := store.ID(sha256.Sum256(append([]byte(ns), b[:]...)))
		data := append([]byte("chunk of "+ns+" "), b[:]...)
		if err := storeBytes(f.st, storeNS(rec), id, data, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func (f *fixture) owners(ns string, id store.ID) []string {
	var out []string
	for _, m := range f.rg.Owners(ns, id[:], int(f.recs[ns].GetReplicationFactor())) {
		out = append(out, m.ID)
	}
	return out
}

func (f *fixture) holdsHere(ns string, id store.ID) bool {
	rec := f.recs[ns]
	return f.st.Contains(namespace.StoreName(rec.GetName(), rec.GetFingerprint()), id)
}

// TestAPassPutsEveryChunkOnItsOwners: node a holds chunks of a one-replica
// and a two-replica namespace, written while it was the only member. After
// one pass on a three-member ring every chunk is held by each of its owners,
// a keeps exactly the chunks it owns, and nothing is under-replicated.
func TestAPassPutsEveryChunkOnItsOwners(t *testing.T) {
	f := newFixture(t, "a", "b", "c")
	r1, r2 := f.put(t, "r1", 60), f.put(t, "r2", 60)
	st := f.m.Pass(context.Background())
	for ns, ids := range map[string][]store.ID{"r1": r1, "r2": r2} {
		for _, id := range ids {
			owners := f.owners(ns, id)
			for _, o := range owners {
				if o != "a" && !f.peers.held(o, f.recs[ns], id) {
					t.Fatalf("%s chunk %s: owner %s does not hold it after the pass", ns, id, o)
				}
			}
			if here, owner := f.holdsHere(ns, id), slices.Contains(owners, "a"); here != owner {
				t.Fatalf("%s chunk %s (owners %v): held by a %v", ns, id, owners, here)
			}
		}
	}
	if st.Pending != 0 || st.Underreplicated != 0 || st.FailedCopies != 0 || st.Misplaced == 0 || st.Evicted != st.Misplaced {
		t.Fatalf("pass stats %+v: want every misplaced chunk evicted, nothing pending", st)
	}
	if again := f.m.Pass(context.Background()); again.Copied != 0 || again.Misplaced != 0 {
		t.Fatalf("a second pass copied %d chunks, found %d misplaced: want nothing to do", again.Copied, again.Misplaced)
	}
}

// TestAnUnreachableOwnerKeepsItsChunksHere: while an owner cannot be asked,
// the chunks it should hold stay on this node (counted pending, the pass
// gossips that it hands off); once the owner answers, the next pass hands
// them over and stops gossiping.
func TestAnUnreachableOwnerKeepsItsChunksHere(t *testing.T) {
	f := newFixture(t, "a", "b")
	var announced []bool
	f.m.cfg.Announce = func(_ context.Context, s moves.Summary) error { announced = append(announced, !s.Empty()); return nil }
	ids := f.put(t, "r1", 40)
	f.peers.down["b"] = true
	st := f.m.Pass(context.Background())
	if st.Pending == 0 || st.Pending != st.Misplaced || !slices.Equal(st.Unreachable, []string{"b"}) || st.Evicted != 0 {
		t.Fatalf("pass with b down: %+v, want every misplaced chunk pending and b unreachable", st)
	}
	for _, id := range ids {
		if !f.holdsHere("r1", id) {
			t.Fatalf("chunk %s left a while its owner is unreachable", id)
		}
	}
	f.peers.down["b"] = false
	st = f.m.Pass(context.Background())
	if st.Pending != 0 || st.Evicted != st.Misplaced {
		t.Fatalf("pass with b back: %+v", st)
	}
	for _, id := range ids {
		if owners := f.owners("r1", id); owners[0] == "b" && (f.holdsHere("r1", id) || !f.peers.held("b", f.recs["r1"], id)) {
			t.Fatalf("chunk %s not handed to b", id)
		}
	}
	if !slices.Equal(announced, []bool{true, false}) {
		t.Fatalf("announced %v, want handing off then done", announced)
	}
}

// TestARefusedCopyIsNotEvicted: an owner that rejects the copies (no room)
// leaves the chunks here, counted as failed and pending.
func TestARefusedCopyIsNotEvicted(t *testing.T) {
	f := newFixture(t, "a", "b")
	f.put(t, "r1", 40)
	f.peers.refuse["b"] = true
	st := f.m.Pass(context.Background())
	if st.Misplaced == 0 || st.FailedCopies != st.Misplaced || st.Pending != st.Misplaced || st.Evicted != 0 || len(st.Errors) == 0 {
		t.Fatalf("pass stats %+v: want every copy failed and kept", st)
	}
	if !st.undone() {
		t.Fatal("a pass with refused copies must be retried")
	}
}

// TestADrainingNodeWithNowhereToGoStopsAtOnce: the only member drains (its
// owners are none): Drain returns after one pass, with everything pending
// and counted as having no owner.
func TestADrainingNodeWithNowhereToGoStopsAtOnce(t *testing.T) {
	f := newFixture(t, "a")
	asked := 0
	f.m.cfg.Owners = func(*ring.Ring, string, []byte, int) []ring.Member { asked++; return nil } // a drains
	f.put(t, "r1", 10)
	st := f.m.Drain(context.Background())
	if st.Pending != 10 || st.NoOwner != 10 || st.Held != 10 || f.m.Status().Passes != 1 {
		t.Fatalf("drain: %+v after %d passes", st, f.m.Status().Passes)
	}
	// Alone on the ring, no chunk has anywhere to go: the drain asks for no
	// chunk's owners (a pass over a million chunks took 20 s to find that out).
	if asked != 0 {
		t.Fatalf("the only member's drain asked for owners %d times, want 0", asked)
	}
}

// TestAPassStoppedBeforeItsPlanLeavesEverythingPending: a pass whose
// context has ended (the node closes; a drain ran out of time) asks for no
// chunk's owners, moves nothing and counts every held chunk pending: Close
// waits for the pass, and planning a million chunks took seconds.
func TestAPassStoppedBeforeItsPlanLeavesEverythingPending(t *testing.T) {
	f := newFixture(t, "a", "b", "c")
	asked := 0
	owners := f.m.cfg.Owners
	f.m.cfg.Owners = func(rg *ring.Ring, ns string, key []byte, r int) []ring.Member {
		asked++
		return owners(rg, ns, key, r)
	}
	f.put(t, "r1", 20)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st := f.m.Pass(ctx)
	if asked != 0 || st.Held != 20 || st.Pending != 20 || st.Copied != 0 || st.Evicted != 0 {
		t.Fatalf("a stopped pass asked owners %d times, stats %+v; want none asked, 20 held and pending", asked, st)
	}
	if got := f.m.Status().Passes; got != 1 {
		t.Fatalf("%d passes recorded, want 1", got)
	}
}

// TestGroupedChunksTravelWithTheirKeys: a chunk of a namespace placed by
// groups goes to the owners of its group key and carries that key; one
// stored without a key (an earlier release) is never moved.
func TestGroupedChunksTravelWithTheirKeys(t *testing.T) {
	f := newFixture(t, "a", "b", "c")
	rec := &kvringv1.NamespaceRecord{Name: "g", Schema: &kvringv1.NamespaceSchema{ChunksPerGroup: 4}, ReplicationFactor: 1, MinReplicas: 1}
	rec.Fingerprint = namespace.Fingerprint(rec.GetSchema())
	if _, _, err := f.m.cfg.Registry.Merge(rec); err != nil {
		t.Fatal(err)
	}
	sn := namespace.StoreName("g", rec.GetFingerprint())
	var group store.ID
	for i := range 200 { // a group key a does not own
		group = store.ID(sha256.Sum256([]byte{byte(i), 'g'}))
		if f.rg.Owners("g", group[:], 1)[0].ID != "a" {
			break
		}
	}
	keyed, unkeyed := store.ID(sha256.Sum256([]byte("k"))), store.ID(sha256.Sum256([]byte("u")))
	if err := storeBytes(f.st, sn, keyed, []byte("grouped chunk"), &group); err != nil {
		t.Fatal(err)
	}
	if err := storeBytes(f.st, sn, unkeyed, []byte("grouped chunk"), nil); err != nil {
		t.Fatal(err)
	}
	st := f.m.Pass(context.Background())
	owner := f.rg.Owners("g", group[:], 1)[0].ID
	if !f.peers.held(owner, rec, keyed) || f.peers.places[keyed] != group || f.st.Contains(sn, keyed) {
		t.Fatalf("keyed chunk: held by its group's owner %s %v, key carried %v, still here %v",
			owner, f.peers.held(owner, rec, keyed), f.peers.places[keyed] == group, f.st.Contains(sn, keyed))
	}
	if !f.st.Contains(sn, unkeyed) || st.UnknownPlacement != 1 {
		t.Fatalf("chunk without a key: still here %v, unknown placement %d", f.st.Contains(sn, unkeyed), st.UnknownPlacement)
	}
}

// TestThePacerSpacesTheBytes: at 1 MiB/s with a one-second burst, 3 MiB in
// 512 KiB steps wait two seconds in all, on the injected clock.
func TestThePacerSpacesTheBytes(t *testing.T) {
	now := time.Unix(1000, 0)
	var slept time.Duration
	p := pacer{rate: 1 << 20, now: func() time.Time { return now },
		sleep: func(_ context.Context, d time.Duration) error { slept += d; now = now.Add(d); return nil }}
	for range 6 {
		if err := p.wait(context.Background(), 512<<10); err != nil {
			t.Fatal(err)
		}
	}
	if slept != 2*time.Second {
		t.Fatalf("slept %v, want 2s", slept)
	}
}

// barrierPeers delays its first Has answer until the other node's first Has
// has been answered too, so both confirm before either settles.
type barrierPeers struct {
	*fakePeers
	once    sync.Once
	arrived *sync.WaitGroup
}

func (b *barrierPeers) Has(ctx context.Context, m ring.Member, rec *kvringv1.NamespaceRecord, raw [][]byte, pin *kvringv1.LeasePin) ([]bool, time.Duration, error) {
	held, ttl, err := b.fakePeers.Has(ctx, m, rec, raw, pin)
	b.once.Do(func() {
		b.arrived.Done()
		b.arrived.Wait()
	})
	return held, ttl, err
}

// TestTwoNodesThatDisagreeNeverBothEvict: nodes a and b hold the same
// chunks, and their ring views disagree (a places every chunk on b, b on
// a: as while a change is still gossiped). Both pass at once and both see
// the other's copy before either settles. Without the pins each would
// evict its copy and the chunks would be lost; with them at least one copy
// of every chunk stays.
func TestTwoNodesThatDisagreeNeverBothEvict(t *testing.T) {
	stores := map[string]*store.Store{"a": openStore(t), "b": openStore(t)}
	reg := namespace.NewRegistry()
	fp := sha256.Sum256([]byte("r1"))
	rec := &kvringv1.NamespaceRecord{Name: "r1", Fingerprint: fp[:], ReplicationFactor: 1, MinReplicas: 1}
	if _, _, err := reg.Merge(rec); err != nil {
		t.Fatal(err)
	}
	rg, err := ring.New([]ring.Member{{ID: "a"}, {ID: "b"}}, 1, ring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var ids []store.ID
	for i := range 50 {
		id := store.ID(sha256.Sum256([]byte{byte(i)}))
		ids = append(ids, id)
		for _, st := range stores {
			if err := storeBytes(st, storeNS(rec), id, []byte("shared chunk"), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	var arrived sync.WaitGroup
	arrived.Add(2)
	movers := map[string]*Mover{}
	for self, other := range map[string]string{"a": "b", "b": "a"} {
		peers := &barrierPeers{fakePeers: newFakePeers(), arrived: &arrived}
		peers.stores[other] = stores[other]
		movers[self] = New(Config{Self: self, Store: stores[self], Registry: reg, Ring: func() *ring.Ring { return rg },
			Owners: func(*ring.Ring, string, []byte, int) []ring.Member { return []ring.Member{{ID: other}} },
			Peers:  peers, Rate: -1, Sweep: -1, Log: slog.New(slog.DiscardHandler)})
	}
	var wg sync.WaitGroup
	for _, m := range movers {
		wg.Go(func() { m.Pass(context.Background()) })
	}
	wg.Wait()
	for _, id := range ids {
		if !stores["a"].Contains(storeNS(rec), id) && !stores["b"].Contains(storeNS(rec), id) {
			t.Fatalf("chunk %s was evicted by both nodes: lost", id)
		}
	}
}

// TestASpreadCopyStaysWhileItsGroupIsSpread: a chunk this node holds as a
// spread copy of a hot group (a live record in Config.Spread, this node in
// the key's spread set) is neither moved nor evicted; once the record
// ends, the next pass finds it misplaced and evicts it, its owner holding
// it.
func TestASpreadCopyStaysWhileItsGroupIsSpread(t *testing.T) {
	f := newFixture(t, "a", "b", "c", "d")
	var now atomic.Int64
	now.Store(time.Unix(1_000_000, 0).UnixNano())
	table := spread.NewTable(spread.TableConfig{Now: func() time.Time { return time.Unix(0, now.Load()) }})
	f.m.cfg.Spread = table
	rec := f.recs["r1"]
	var key store.ID
	for i := 0; ; i++ {
		key = store.ID(sha256.Sum256(fmt.Append(nil, "group ", i)))
		set := f.rg.SpreadSet("r1", key[:], 4)
		if set[0].ID != "a" && slices.ContainsFunc(set, func(m ring.Member) bool { return m.ID == "a" }) {
			break
		}
	}
	owner := f.rg.Owners("r1", key[:], 1)[0].ID
	data := []byte("a spread copy")
	id := store.ID(sha256.Sum256(data))
	if err := storeBytes(f.st, storeNS(rec), id, data, &key); err != nil {
		t.Fatal(err)
	}
	if err := storeBytes(f.peers.stores[owner], storeNS(rec), id, data, &key); err != nil {
		t.Fatal(err)
	}
	table.Hold(spread.Key{NS: storeNS(rec), Place: key}, 4, time.Unix(0, now.Load()).Add(time.Minute))
	if st := f.m.Pass(context.Background()); st.SpreadKept != 1 || st.Misplaced != 0 || !f.holdsHere("r1", id) {
		t.Fatalf("pass while spread: %+v, held here %v: want the copy kept", st, f.holdsHere("r1", id))
	}
	now.Add(int64(2 * time.Minute))
	if st := f.m.Pass(context.Background()); st.Misplaced != 1 || st.Evicted != 1 || f.holdsHere("r1", id) {
		t.Fatalf("pass after the record ended: %+v, held here %v: want the copy evicted", st, f.holdsHere("r1", id))
	}
	if !f.peers.held(owner, rec, id) {
		t.Fatal("the owner lost the chunk")
	}
}

// TestPassesThatGetNowhereBackOff: while an owner stays unreachable, a
// mover asks again after Retry, then twice as long each pass that did
// nothing, up to Sweep; a pass that hands chunks over (the owner is back)
// starts over at Retry, and one with nothing left to do waits Sweep.
func TestPassesThatGetNowhereBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, "a", "b")
		f.m.cfg.Retry, f.m.cfg.Sweep, f.m.cfg.Quiet = 5*time.Second, time.Minute, -1
		f.put(t, "r1", 40)
		f.peers.down["b"] = true
		f.m.Start()
		defer f.m.Close()
		passes := func() int64 {
			synctest.Wait()
			return f.m.Status().Passes
		}
		var at []time.Duration
		start := time.Now()
		if n := passes(); n != 1 {
			t.Fatalf("%d passes at the start, want 1 (at once)", n)
		}
		for n := passes(); len(at) < 5; {
			time.Sleep(time.Second)
			if p := passes(); p != n {
				n = p
				at = append(at, time.Since(start).Round(time.Second))
			}
		}
		// After the first, passes 5, 10, 20, 40 and 60 s apart.
		want := []time.Duration{5 * time.Second, 15 * time.Second, 35 * time.Second, 75 * time.Second, 135 * time.Second}
		for i := range want {
			if d := at[i] - want[i]; d < -time.Second || d > time.Second {
				t.Fatalf("passes at %v, want about %v", at, want)
			}
		}
		f.peers.mu.Lock()
		f.peers.down["b"] = false // the mover's goroutines read it
		f.peers.mu.Unlock()
		time.Sleep(time.Minute + 5*time.Second) // the next retry, now at Sweep, hands the chunks over
		if st := f.m.Status(); st.Last.Evicted == 0 || st.Last.Pending != 0 {
			t.Fatalf("pass after b came back: %+v, want the chunks handed over", st.Last)
		}
		n := passes()
		time.Sleep(2 * time.Minute)
		if got := passes() - n; got != 2 {
			t.Fatalf("%d passes in the two minutes after everything was handed over, want 2 (one per Sweep)", got)
		}
	})
}
