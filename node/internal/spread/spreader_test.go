package spread

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kvring/kvring/node/internal/chunkcopy"
	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// spreaderFixture is a Spreader on member "n0" of an 8-member ring, over a
// real store, with a grouped namespace; its Copy records what it was asked
// to send where.
type spreaderFixture struct {
	s     *Spreader
	st    *store.Store
	rg    *ring.Ring
	rec   *kvringv1.NamespaceRecord
	ns    string
	table *Table
	mu    sync.Mutex
	sent  map[string][]store.ID // member → chunk ids copied there
	marks map[string][2]int     // member → width, ttl in seconds
}

func newSpreaderFixture(t *testing.T) *spreaderFixture {
	t.Helper()
	st, err := store.Open(store.Config{DataDir: t.TempDir(), ShmDir: t.TempDir(), MemoryLimit: 8 << 20,
		MaintenanceInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var ms []ring.Member
	for i := range 8 {
		ms = append(ms, ring.Member{ID: fmt.Sprint("n", i), Addr: fmt.Sprint("n", i, ":1")})
	}
	rg, err := ring.New(ms, 1, ring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	fp := sha256.Sum256([]byte("fp"))
	rec := &kvringv1.NamespaceRecord{Name: "g", Fingerprint: fp[:], ReplicationFactor: 1, MinReplicas: 1,
		Schema: &kvringv1.NamespaceSchema{Model: "m", Dtype: "bf16", TokensPerChunk: 16, ChunksPerGroup: 4}}
	reg := namespace.NewRegistry()
	if _, _, err := reg.Merge(rec); err != nil {
		t.Fatal(err)
	}
	f := &spreaderFixture{st: st, rg: rg, rec: rec, ns: namespace.StoreName("g", fp[:]), table: NewTable(TableConfig{}),
		sent: map[string][]store.ID{}, marks: map[string][2]int{}}
	f.s = New(Config{Self: "n0", Store: st, Registry: reg, Ring: func() *ring.Ring { return rg },
		Owners: func(rg *ring.Ring, ns string, key []byte, r int) []ring.Member { return rg.Owners(ns, key, r) },
		Copy: func(_ context.Context, m ring.Member, _ *kvringv1.NamespaceRecord, chunks []chunkcopy.Chunk, sp chunkcopy.Spread) []error {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, c := range chunks {
				if len(c.View.Bytes()) == 0 {
					t.Errorf("chunk %s sent without bytes", c.ID)
				}
				f.sent[m.ID] = append(f.sent[m.ID], c.ID)
			}
			f.marks[m.ID] = [2]int{sp.Width, int(sp.TTL / time.Second)}
			return make([]error, len(chunks))
		},
		Table: f.table, Width: 4, TTL: time.Minute, Log: slog.New(slog.DiscardHandler)})
	return f
}

// key returns a group key whose primary owner is (or is not) n0.
func (f *spreaderFixture) key(t *testing.T, primary bool) store.ID {
	t.Helper()
	for i := range 10_000 {
		k := store.ID(sha256.Sum256(fmt.Append(nil, "key", i)))
		if p, _ := f.rg.Primary("g", k[:]); (p.ID == "n0") == primary {
			return k
		}
	}
	t.Fatal("no key found")
	return store.ID{}
}

func (f *spreaderFixture) hold(t *testing.T, n int) []store.ID {
	t.Helper()
	var ids []store.ID
	for i := range n {
		data := fmt.Appendf(nil, "chunk %d", i)
		cid := store.ID(sha256.Sum256(data))
		w, err := f.st.Stage(f.ns, cid, int64(len(data)), store.Checksum(data))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Seal(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cid)
	}
	return ids
}

// TestThePrimarySpreadsAHotGroupToTheRestOfItsSpreadSet: the primary owner
// copies the sampled chunks it holds (not the ones it lacks) to each member
// of the key's spread set but itself, marked with the width and keeping
// time, and records that it spreads the group; a node that is not the
// primary copies nothing.
func TestThePrimarySpreadsAHotGroupToTheRestOfItsSpreadSet(t *testing.T) {
	f := newSpreaderFixture(t)
	ids := f.hold(t, 3)
	missing := store.ID(sha256.Sum256([]byte("never stored")))
	key := f.key(t, true)
	f.s.Offer(Hot{Key: Key{NS: f.ns, Place: key}, IDs: append(ids, missing)})
	if n := f.s.RunOnce(context.Background()); n != 1 {
		t.Fatalf("RunOnce handled %d", n)
	}
	set := f.rg.SpreadSet("g", key[:], 4)
	if len(f.sent) != 3 {
		t.Fatalf("copied to %d members (%v), want the 3 of the set %v but n0", len(f.sent), f.sent, set)
	}
	for _, m := range set[1:] {
		if len(f.sent[m.ID]) != 3 || f.marks[m.ID] != [2]int{4, 60} {
			t.Fatalf("member %s got %d chunks marked %v, want the 3 held, width 4, 60 s", m.ID, len(f.sent[m.ID]), f.marks[m.ID])
		}
	}
	if k := (Key{NS: f.ns, Place: key}); !f.table.Holds(k) || f.table.Width(k) != 4 {
		t.Fatal("the primary did not record the group as spread")
	}
	if st := f.s.Stats(); st.Spread != 1 || st.Copied != 9 {
		t.Fatalf("stats %+v", st)
	}

	f.sent = map[string][]store.ID{}
	f.s.Offer(Hot{Key: Key{NS: f.ns, Place: f.key(t, false)}, IDs: ids})
	f.s.RunOnce(context.Background())
	if len(f.sent) != 0 {
		t.Fatalf("a node that is not the primary copied %v", f.sent)
	}
}

// TestAFullSpreaderQueueDropsAndCounts: Offer never blocks.
func TestAFullSpreaderQueueDropsAndCounts(t *testing.T) {
	f := newSpreaderFixture(t)
	for range queueLen + 5 {
		f.s.Offer(Hot{})
	}
	if d := f.s.Stats().Dropped; d != 5 {
		t.Fatalf("dropped %d, want 5", d)
	}
}

// TestWidthZeroGrowsWithTheRing: with no width configured the spread set is
// ring.SpreadWidth of the ring's size wide (the whole 8-member ring here).
func TestWidthZeroGrowsWithTheRing(t *testing.T) {
	f := newSpreaderFixture(t)
	f.s.cfg.Width = 0
	ids := f.hold(t, 2)
	key := f.key(t, true)
	f.s.Offer(Hot{Key: Key{NS: f.ns, Place: key}, IDs: ids})
	f.s.RunOnce(context.Background())
	want := ring.SpreadWidth(f.rg.Len())
	set := f.rg.SpreadSet("g", key[:], want)
	if len(set) != want || len(f.sent) != want-1 {
		t.Fatalf("copied to %d members of a set of %d, want %d", len(f.sent), len(set), want-1)
	}
	for _, m := range set[1:] {
		if f.marks[m.ID][0] != want {
			t.Fatalf("member %s marked width %d, want %d", m.ID, f.marks[m.ID][0], want)
		}
	}
}
