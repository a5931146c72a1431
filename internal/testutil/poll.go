// Package testutil holds helpers that tests of several kvring packages share.
// Only tests import it.
package testutil

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually checks its condition.
const pollEvery = 5 * time.Millisecond

// Eventually polls cond until it holds and fails the test with "timed out
// waiting for <what>" when it still does not hold after timeout. It is the
// one way kvring's tests wait for something another goroutine or process
// does: a condition with a deadline, never a bare sleep. The deadline is
// generous on purpose (a loaded 2-core machine is slow); it bounds a test
// that would otherwise hang, it is not a speed assertion.
func Eventually(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(pollEvery)
	}
}
