package spread

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvring/kvring/store"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newClock() *clock { return &clock{t: time.Unix(1_000_000, 0)} }

func id(label string) []byte { s := sha256.Sum256([]byte(label)); return s[:] }

// ask makes one lookup of n ids under key.
func ask(c *Counter, key []byte, n int) {
	ids, keys := make([][]byte, n), make([][]byte, n)
	for i := range n {
		ids[i], keys[i] = id(fmt.Sprint(string(key), i)), key
	}
	c.Asked("ns", ids, keys)
}

// TestAGroupTurnsHotOnceAWindowAtTheThreshold: a key is reported hot by the
// lookup that reaches the threshold within one window, once per window,
// with the ids asked so far; a new window counts from zero.
func TestAGroupTurnsHotOnceAWindowAtTheThreshold(t *testing.T) {
	clk := newClock()
	var hot []Hot
	c := NewCounter(CounterConfig{Threshold: 3, Window: 10 * time.Second, Now: clk.now, OnHot: func(h Hot) { hot = append(hot, h) }})
	key, cold := id("hot"), id("cold")
	ask(c, key, 2)
	ask(c, cold, 2)
	ask(c, key, 4) // more ids of the same group: a continuation
	if len(hot) != 0 {
		t.Fatalf("hot after 2 lookups: %v", hot)
	}
	ask(c, key, 4)
	if len(hot) != 1 || hot[0].Key != (Key{NS: "ns", Place: store.ID(key)}) || len(hot[0].IDs) != 4 {
		t.Fatalf("after 3 lookups: %+v, want the key hot once with its 4 distinct ids", hot)
	}
	ask(c, key, 4)
	if len(hot) != 1 {
		t.Fatalf("a hot key was reported %d times in one window", len(hot))
	}
	clk.add(10 * time.Second)
	ask(c, key, 1)
	ask(c, key, 1)
	if len(hot) != 1 {
		t.Fatal("a new window did not count from zero")
	}
	ask(c, key, 1)
	if len(hot) != 2 || len(hot[1].IDs) != 1 {
		t.Fatalf("the next window's report: %+v", hot)
	}
}

// TestACounterWithANegativeThresholdFindsNothingHot: spreading off.
func TestACounterWithANegativeThresholdFindsNothingHot(t *testing.T) {
	fired := false
	c := NewCounter(CounterConfig{Threshold: -1, OnHot: func(Hot) { fired = true }})
	for range 1000 {
		ask(c, id("k"), 1)
	}
	if fired {
		t.Fatal("a key turned hot with spreading off")
	}
}

// TestASampleIsBounded: a hot key carries at most MaxSampledIDs ids.
func TestASampleIsBounded(t *testing.T) {
	var got Hot
	c := NewCounter(CounterConfig{Threshold: 1, OnHot: func(h Hot) { got = h }})
	ask(c, id("big"), 3*MaxSampledIDs)
	if len(got.IDs) != MaxSampledIDs {
		t.Fatalf("sampled %d ids, want %d", len(got.IDs), MaxSampledIDs)
	}
}

// TestTableRecordsEndWithTheirTime: a Hold lasts until its time (a later
// Hold extends it, an earlier one does not shorten it), a Hint gives the
// width until its own time, and both end.
func TestTableRecordsEndWithTheirTime(t *testing.T) {
	clk := newClock()
	tb := NewTable(TableConfig{Now: clk.now})
	held, heard := Key{NS: "ns", Place: store.ID(id("a"))}, Key{NS: "ns", Place: store.ID(id("b"))}
	tb.Hold(held, 8, clk.now().Add(time.Minute))
	tb.Hold(held, 8, clk.now().Add(time.Second))
	tb.Hint(heard, 4, clk.now().Add(15*time.Second))
	tb.Hint(Key{NS: "ns", Place: store.ID(id("c"))}, 1, clk.now().Add(time.Minute)) // not spread: not kept
	if !tb.Holds(held) || tb.Width(held) != 8 || tb.Holds(heard) || tb.Width(heard) != 4 || tb.Holding() != 1 {
		t.Fatalf("holds %v/%v width %d/%d holding %d", tb.Holds(held), tb.Holds(heard), tb.Width(held), tb.Width(heard), tb.Holding())
	}
	clk.add(20 * time.Second)
	if tb.Width(heard) != 0 || !tb.Holds(held) {
		t.Fatal("a hint outlived its time, or a hold ended early")
	}
	tb.Hint(held, 1, clk.now().Add(time.Minute)) // a holder says it cooled down: the hold stays
	if !tb.Holds(held) {
		t.Fatal("a hint ended a hold")
	}
	clk.add(time.Minute)
	if tb.Holds(held) || tb.Width(held) != 0 {
		t.Fatal("a hold outlived its time")
	}
	tb.Sweep()
	if n := len(tb.m); n != 0 {
		t.Fatalf("%d records left after their time and a sweep", n)
	}
}

// TestAFullTableKeepsHoldsAndDropsNewHints: hints past MaxRecords are not
// kept (after ended records are swept); holds always are.
func TestAFullTableKeepsHoldsAndDropsNewHints(t *testing.T) {
	clk := newClock()
	tb := NewTable(TableConfig{Now: clk.now, MaxRecords: 2})
	until := clk.now().Add(time.Minute)
	tb.Hint(Key{Place: store.ID(id("1"))}, 4, until)
	tb.Hint(Key{Place: store.ID(id("2"))}, 4, until)
	tb.Hint(Key{Place: store.ID(id("3"))}, 4, until)
	if tb.Width(Key{Place: store.ID(id("3"))}) != 0 {
		t.Fatal("a hint past MaxRecords was kept")
	}
	tb.Hold(Key{Place: store.ID(id("4"))}, 4, until)
	if !tb.Holds(Key{Place: store.ID(id("4"))}) {
		t.Fatal("a hold was dropped from a full table")
	}
}

// TestAMeterReportsTheLastSecondsCalls: Rate is the last full second's
// count (or the current one's when higher), 0 after a quiet second.
func TestAMeterReportsTheLastSecondsCalls(t *testing.T) {
	clk := newClock()
	m := NewMeter(clk.now)
	for range 7 {
		m.Add()
	}
	if r := m.Rate(); r != 7 {
		t.Fatalf("rate %d during the first second, want 7", r)
	}
	clk.add(time.Second)
	m.Add()
	if r := m.Rate(); r != 7 {
		t.Fatalf("rate %d in the next second, want the last second's 7", r)
	}
	clk.add(2 * time.Second)
	if r := m.Rate(); r != 0 {
		t.Fatalf("rate %d after a quiet second, want 0", r)
	}
}

// TestLoadHintsEndWithTheirTime: a reported load is believed for
// loadHintTTL, and members that left are forgotten.
func TestLoadHintsEndWithTheirTime(t *testing.T) {
	clk := newClock()
	l := NewLoads(clk.now)
	l.Note("a", 40)
	l.Note("b", 3)
	if l.Of("a") != 40 || l.Of("c") != 0 {
		t.Fatal("hints not kept")
	}
	l.Forget(map[string]bool{"a": true})
	if l.Of("b") != 0 {
		t.Fatal("a member that left is still hinted")
	}
	clk.add(loadHintTTL + time.Second)
	if l.Of("a") != 0 {
		t.Fatal("a hint outlived its time")
	}
}

// TestASpreadGroupStaysHotWithItsShareOfTheLookups: once a group is spread
// to w members its primary sees about one lookup in w, so the threshold
// that keeps it spread is Threshold/w.
func TestASpreadGroupStaysHotWithItsShareOfTheLookups(t *testing.T) {
	clk := newClock()
	tb := NewTable(TableConfig{Now: clk.now})
	fired := 0
	c := NewCounter(CounterConfig{Threshold: 32, Now: clk.now, Spread: tb, OnHot: func(Hot) { fired++ }})
	key := id("system prompt")
	tb.Hold(Key{NS: "ns", Place: store.ID(key)}, 8, clk.now().Add(time.Hour))
	for range 3 {
		ask(c, key, 1)
	}
	if fired != 0 {
		t.Fatal("hot after 3 lookups, threshold 32/8")
	}
	ask(c, key, 1)
	if fired != 1 {
		t.Fatalf("a group spread 8 wide was not hot after 4 lookups (32/8): fired %d", fired)
	}
}
