package coord

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvring/kvring/transfer"
)

// TestABeginGateBoundsEachClientsReadersAndRefusesTheRestAtTheirDeadline:
// past its bound, a client's stream waits for one of that client's readers
// (first come, first served) and is refused with ResourceExhausted if none
// frees before its deadline; another client is not held up by it.
func TestABeginGateBoundsEachClientsReadersAndRefusesTheRestAtTheirDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &beginGate{max: 2}
		ctx := context.Background()
		never := make(chan time.Time)
		var leaves []func()
		for range 2 {
			leave, err := g.enter(ctx, "a", never)
			if err != nil {
				t.Fatal(err)
			}
			leaves = append(leaves, leave)
		}
		type entered struct {
			leave func()
			err   error
		}
		third, fourth := make(chan entered, 1), make(chan entered, 1)
		go func() { l, err := g.enter(ctx, "a", never); third <- entered{l, err} }()
		synctest.Wait()
		go func() { l, err := g.enter(ctx, "a", time.After(time.Second)); fourth <- entered{l, err} }()
		synctest.Wait()
		if len(third) != 0 || len(fourth) != 0 {
			t.Fatal("a client's stream past its bound got a reader while its readers were busy")
		}
		other, err := g.enter(ctx, "b", never)
		if err != nil {
			t.Fatalf("another client's stream: %v", err)
		}
		other()
		leaves[0]() // a reader ends: the longest waiting stream gets its turn
		synctest.Wait()
		got := <-third
		if got.err != nil {
			t.Fatalf("the first waiting stream: %v", got.err)
		}
		time.Sleep(time.Second) // synctest: the fourth's deadline passes
		if got := <-fourth; !errors.Is(got.err, errTooManyAwaitingBegin) || !errors.Is(got.err, transfer.ErrResourceExhausted) {
			t.Fatalf("a stream whose deadline passed while it waited: %v, want errTooManyAwaitingBegin", got.err)
		}
		leaves[1]()
		got.leave()
		got.leave() // leave is idempotent
		if len(g.clients) != 0 {
			t.Fatalf("the gate keeps %d clients with nothing in flight", len(g.clients))
		}
	})
}

// TestBeginDeadlinesAreSpread: streams opened together get deadlines spread
// over IdleTimeout to one and a half times it, so they are not all ended,
// and re-opened by a flood, in the same instant.
func TestBeginDeadlinesAreSpread(t *testing.T) {
	const idle = 10 * time.Second
	seen := map[time.Duration]bool{}
	for range 100 {
		d := beginDeadline(idle)
		if d < idle || d > idle*3/2 {
			t.Fatalf("begin deadline %s, want between %s and %s", d, idle, idle*3/2)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Fatalf("100 begin deadlines took %d values: not spread", len(seen))
	}
	if beginDeadline(0) != 0 {
		t.Fatal("no idle timeout must mean no begin deadline")
	}
}

// TestAStreamHandedASlotAsItGivesUpPassesItOn: a waiting stream whose
// deadline passes just as a reader hands it its slot must pass the slot on,
// not read with its deadline spent (it then waited for its call's end:
// a flood test ran into its own one-minute deadline).
func TestAStreamHandedASlotAsItGivesUpPassesItOn(t *testing.T) {
	g := &beginGate{max: 1}
	leave, err := g.enter(context.Background(), "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	q := g.clients["a"]
	turn := make(chan struct{})
	q.waiting = append(q.waiting, turn) // a stream waits...
	leave()                             // ...is handed the slot...
	g.giveUp("a", q, turn)              // ...as its deadline passes
	if len(g.clients) != 0 {
		t.Fatalf("the gate holds %+v once nothing reads or waits", g.clients["a"])
	}
	if _, err := g.enter(context.Background(), "a", nil); err != nil {
		t.Fatalf("a new stream after the slot was passed on: %v", err)
	}
}
