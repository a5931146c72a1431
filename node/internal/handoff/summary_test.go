package handoff

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kvring/kvring/node/internal/moves"
	"github.com/kvring/kvring/store"
)

// TestTheSummaryNamesThePartitionsHeldElsewhereUntilHandedOff: before its
// first pass a node may hold anything (All); a pass names exactly the
// partitions of the chunks it holds without owning them while it copies
// them, and nothing once their owners hold them; a write staged here for a
// partition it does not own is named at once, and forgotten once a pass has
// handed it off.
func TestTheSummaryNamesThePartitionsHeldElsewhereUntilHandedOff(t *testing.T) {
	f := newFixture(t, "a", "b", "c")
	var told []moves.Summary
	f.m.cfg.Announce = func(_ context.Context, s moves.Summary) error { told = append(told, s); return nil }
	if !f.m.Summary().All {
		t.Fatal("before a pass the summary must say: anything")
	}
	ids := f.put(t, "r1", 60)
	var foreign []int
	for _, id := range ids {
		if f.owners("r1", id)[0] != "a" {
			foreign = append(foreign, f.rg.Partition("r1", id[:]))
		}
	}
	if len(foreign) == 0 {
		t.Fatal("every chunk is a's: the test proves nothing")
	}
	f.m.Pass(context.Background())
	if len(told) != 2 {
		t.Fatalf("gossiped %d summaries, want the plan's and the end's", len(told))
	}
	want := moves.FromPartitions(moves.RingHash(f.rg), foreign)
	if !told[0].Equal(want) {
		t.Fatalf("while copying: %+v, want %+v", told[0], want)
	}
	if !told[1].Empty() || told[1].Ring != moves.RingHash(f.rg) {
		t.Fatalf("handed off: %+v, want nothing on the ring", told[1])
	}

	// A write for a partition of b's, staged here (a coordinator whose ring
	// was behind): named at once.
	rec := f.recs["r1"]
	var id store.ID
	for n := byte(0); ; n++ {
		id = store.ID{n, 1}
		if f.owners("r1", id)[0] != "a" {
			break
		}
	}
	if err := storeBytes(f.st, storeNS(rec), id, []byte("late write"), nil); err != nil {
		t.Fatal(err)
	}
	f.m.Placed("r1", storeNS(rec), 1, [][]byte{id[:]}, []store.ID{id})
	p := f.rg.Partition("r1", id[:])
	if s := f.m.Summary(); !s.Contains(p) || s.Partitions() != 1 {
		t.Fatalf("after a foreign write: %+v, want partition %d alone", s, p)
	}
	f.m.Pass(context.Background())
	if s := f.m.Summary(); !s.Empty() {
		t.Fatalf("after its hand-off: %+v", s)
	}
	if !f.peers.held(f.owners("r1", id)[0], rec, id) {
		t.Fatal("the late write was not handed to its owner")
	}
}

// TestARestartedNodeNamesItsCatalogsPartitionsBeforeItsFirstPass: a node
// that starts on a catalog gossips, before any pass, the partitions of every
// chunk it holds (owned or not, on any ring), not "anything": readers ask it
// about those partitions only. A write staged before the first pass adds its
// partition; the first pass replaces the list with the partitions it holds
// without owning them on its ring.
func TestARestartedNodeNamesItsCatalogsPartitionsBeforeItsFirstPass(t *testing.T) {
	f := newFixture(t, "a", "b", "c")
	var told []moves.Summary
	f.m.cfg.Announce = func(_ context.Context, s moves.Summary) error { told = append(told, s); return nil }
	var all, foreign []int
	for _, ns := range []string{"r1", "r2"} {
		for _, id := range f.put(t, ns, 40) {
			p := f.rg.Partition(ns, id[:])
			all = append(all, p)
			if !slices.Contains(f.owners(ns, id), "a") {
				foreign = append(foreign, p)
			}
		}
	}
	f.m.Boot(context.Background())
	want := moves.FromCatalog(all)
	if len(told) != 1 || !told[0].Equal(want) || told[0].All {
		t.Fatalf("at start-up gossiped %+v, want the catalog's %d partitions", told, want.Partitions())
	}

	rec := f.recs["r1"]
	id := store.ID{9, 9, 9}
	if err := storeBytes(f.st, storeNS(rec), id, []byte("written before the first pass"), nil); err != nil {
		t.Fatal(err)
	}
	f.m.Placed("r1", storeNS(rec), 1, [][]byte{id[:]}, []store.ID{id})
	p := f.rg.Partition("r1", id[:])
	if s := f.m.Summary(); !s.AnyRing || !s.Contains(p) || s.Partitions() != moves.FromCatalog(append(all, p)).Partitions() {
		t.Fatalf("after a write: %+v, want the catalog's partitions and %d", s, p)
	}
	if !slices.Contains(f.owners("r1", id), "a") {
		foreign = append(foreign, p)
	}

	f.m.Pass(context.Background())
	if len(told) < 2 || !told[len(told)-2].Equal(moves.FromPartitions(moves.RingHash(f.rg), foreign)) {
		t.Fatalf("the first pass's plan gossiped %+v, want the %d partitions held without owning them", told, len(foreign))
	}
}

// TestTheSummaryIsGossipedAtMostOncePerPublishGap: the writes that change
// the summary while the publish goroutine waits out its gap go out together
// in one gossip after it, which names them all; without the gap a node
// writing on its own re-encodes and gossips the summary for every write.
func TestTheSummaryIsGossipedAtMostOncePerPublishGap(t *testing.T) {
	f := newFixture(t, "a")
	told := make(chan moves.Summary, 100)
	f.m.cfg.Announce = func(_ context.Context, s moves.Summary) error { told <- s; return nil }
	waiting, release := make(chan time.Duration), make(chan struct{})
	f.m.cfg.Sleep = func(ctx context.Context, d time.Duration) error {
		waiting <- d
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.m.Boot(context.Background()) // an empty catalog: before its first pass the summary names what is written
	<-told
	ctx, cancel := context.WithCancel(context.Background())
	f.m.wg.Add(1)
	go f.m.publishLoop(ctx)
	t.Cleanup(func() { cancel(); f.m.wg.Wait() })

	rec := f.recs["r1"]
	place := func(n byte) int {
		id := store.ID{n, 7}
		f.m.Placed("r1", storeNS(rec), 1, [][]byte{id[:]}, []store.ID{id})
		return f.rg.Partition("r1", id[:])
	}
	parts := []int{place(0)}
	if s := recvWithin(t, told); !s.Contains(parts[0]) {
		t.Fatalf("first write: gossiped %+v, want partition %d", s, parts[0])
	}
	if d := recvWithin(t, waiting); d != f.m.cfg.PublishGap {
		t.Fatalf("the goroutine waits %s after a gossip, want PublishGap %s", d, f.m.cfg.PublishGap)
	}
	for n := byte(1); n <= 40; n++ {
		parts = append(parts, place(n))
	}
	select {
	case s := <-told:
		t.Fatalf("gossiped %d partitions during the gap", s.Partitions())
	default:
	}
	release <- struct{}{}
	s := recvWithin(t, told)
	for _, p := range parts {
		if !s.Contains(p) {
			t.Fatalf("after the gap: gossiped %+v, want partitions %v", s, parts)
		}
	}
	recvWithin(t, waiting) // and it waits again
	if len(told) != 0 {
		t.Fatalf("%d more gossips for the writes of one gap", len(told))
	}
}

// recvWithin receives from ch, failing the test after 10 s.
func recvWithin[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing came within 10s")
	}
	panic("unreachable")
}
