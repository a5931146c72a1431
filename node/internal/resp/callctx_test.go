package resp

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// TestCallCtxBehavesAsAContextWithTimeout: the deadline passes on time,
// the parent's cancellation and values reach it, end cancels it (also
// when nothing waited before), and a context derived from it is cancelled
// with it without a goroutine of its own.
func TestCallCtxBehavesAsAContextWithTimeout(t *testing.T) {
	type key struct{}
	synctest.Test(t, func(t *testing.T) {
		parent := context.WithValue(context.Background(), key{}, "v")
		c := newCallCtx(parent, time.Second)
		if d, ok := c.Deadline(); !ok || d != time.Now().Add(time.Second) {
			t.Fatalf("Deadline = %v, %v", d, ok)
		}
		if c.Value(key{}) != "v" {
			t.Fatal("the parent's value is lost")
		}
		time.Sleep(999 * time.Millisecond)
		if c.Err() != nil {
			t.Fatal("done before its deadline")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err after the deadline = %v", c.Err())
		}
		c.end()
	})

	parent, cancel := context.WithCancel(context.Background())
	c := newCallCtx(parent, time.Hour)
	before := runtime.NumGoroutine()
	child, cancelChild := context.WithCancel(c)
	defer cancelChild()
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("deriving a context started %d goroutines", n-before)
	}
	cancel()
	<-child.Done()
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("after the parent's cancel Err = %v", c.Err())
	}

	c = newCallCtx(context.Background(), time.Hour)
	c.end()
	select {
	case <-c.Done():
	default:
		t.Fatal("a context ended before anything waited on it is not done")
	}
}
