package resp

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvring/kvring/store"
)

// TestAValuePastItsShareWaitsForAnotherToEnd: with the budget held by one
// client, another client's first value waits, and is charged as soon as
// the first client's value ends, before its deadline; nothing is refused.
func TestAValuePastItsShareWaitsForAnotherToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newValueShares(400) // a lone client may hold 300
		if err := v.take(t.Context(), "a", 300, true, time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() { got <- v.take(t.Context(), "b", 150, true, time.Now().Add(30*time.Second)) }()
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("b's value was answered (%v) while a held the budget", err)
		default:
		}
		time.Sleep(10 * time.Second)
		v.give("a", 300)
		if err := <-got; err != nil {
			t.Fatalf("b's value after a's ended: %v", err)
		}
		if v.refusals() != 0 || v.held() != 150 {
			t.Fatalf("refusals %d, held %d; want 0 and 150", v.refusals(), v.held())
		}
	})
}

// TestAValueThatCannotFitIsRefusedAtOnceOrAtItsDeadline: a value over what
// one client may hold alone, and a value of a client that holds some
// already, are refused without waiting; a first value that finds no room
// until its deadline is refused then, -OOM (store.ErrNoSpace).
func TestAValueThatCannotFitIsRefusedAtOnceOrAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := newValueShares(400)
		far := time.Now().Add(time.Hour)
		if err := v.take(t.Context(), "big", 301, true, far); !errors.Is(err, store.ErrNoSpace) || time.Since(far.Add(-time.Hour)) != 0 {
			t.Fatalf("a value over what a client may hold alone: %v after %v, want ErrNoSpace at once", err, time.Since(far.Add(-time.Hour)))
		}
		if err := v.take(t.Context(), "a", 300, true, far); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := v.take(t.Context(), "a", 50, false, far); !errors.Is(err, store.ErrNoSpace) || time.Since(start) != 0 {
			t.Fatalf("a second value of a request past its share: %v after %v, want ErrNoSpace at once", err, time.Since(start))
		}
		if err := v.take(t.Context(), "b", 150, true, start.Add(5*time.Second)); !errors.Is(err, store.ErrNoSpace) {
			t.Fatalf("a value that found no room until its deadline: %v, want ErrNoSpace", err)
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Fatalf("the value was refused after %v, want at its deadline (5s)", waited)
		}
		if v.refusals() != 3 {
			t.Fatalf("refusals = %d, want 3", v.refusals())
		}
		// A waiting value's connection ends: take returns at once.
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan error, 1)
		go func() { got <- v.take(ctx, "c", 150, true, time.Now().Add(time.Hour)) }()
		synctest.Wait()
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("a waiting value whose connection ended: %v, want context.Canceled", err)
		}
		if v.waiters() != 0 {
			t.Fatalf("%d values still wait", v.waiters())
		}
	})
}
