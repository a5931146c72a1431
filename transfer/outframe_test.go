package transfer

import (
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/mem"
)

// lendPieces lends n pieces large enough for gRPC to track (over 1 KiB), as
// a Borrowed OutFrame does, and returns the buffers gRPC would free.
func lendPieces(l *Lender, n int) []mem.Buffer {
	bufs := make([]mem.Buffer, n)
	for i := range bufs {
		bufs[i] = l.lend(make([]byte, 4096))
	}
	return bufs
}

// TestLenderWaitLeavesNoGoroutineBehind: when gRPC never hands a piece back
// (the failed put of client/put.go), Wait gives up at its timeout and nothing
// it started outlives the call, however often it is called. Not parallel:
// goleak looks at every goroutine of the process.
func TestLenderWaitLeavesNoGoroutineBehind(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var l Lender
	bufs := lendPieces(&l, 2)
	bufs[0].Free() // handed back; bufs[1] never is
	for range 20 {
		if l.Wait(time.Millisecond) {
			t.Fatal("Wait reported every piece handed back while one is still lent")
		}
	}
	if n := l.Outstanding(); n != 1 {
		t.Fatalf("Outstanding = %d, want 1", n)
	}
}

// TestLenderWaitReturnsOnceEveryPieceIsPut: Wait returns true as soon as the
// last lent piece comes back, not before and without waiting for its timeout;
// it gives up exactly at its timeout while a piece is out; a Lender with
// nothing out (the zero value, or after every piece came back) does not wait.
func TestLenderWaitReturnsOnceEveryPieceIsPut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var l Lender
		if !l.Wait(time.Hour) {
			t.Fatal("Wait on a zero Lender reported pieces out")
		}
		bufs := lendPieces(&l, 3)
		start := time.Now()
		done := make(chan bool, 1)
		go func() { done <- l.Wait(time.Hour) }()
		for i, b := range bufs {
			synctest.Wait() // Wait is blocked now, or returned
			select {
			case ok := <-done:
				t.Fatalf("Wait returned %v with %d of %d pieces still lent", ok, len(bufs)-i, len(bufs))
			default:
			}
			b.Free() // gRPC lets go of the piece: Lender.Put
		}
		if ok := <-done; !ok || time.Since(start) != 0 {
			t.Fatalf("Wait = %v after %s, want true at once when the last piece came back", ok, time.Since(start))
		}
		if n := l.Outstanding(); n != 0 {
			t.Fatalf("Outstanding = %d after every piece came back", n)
		}
		if !l.Wait(time.Hour) || time.Since(start) != 0 {
			t.Fatal("Wait with nothing lent waited")
		}

		// Lent again after coming back to zero: Wait waits again, for its timeout at most.
		more := lendPieces(&l, 1)
		start = time.Now()
		if l.Wait(time.Second) {
			t.Fatal("Wait reported a piece lent after the first round handed back")
		}
		if waited := time.Since(start); waited != time.Second {
			t.Fatalf("Wait gave up after %s, want its timeout (1s)", waited)
		}
		more[0].Free()
		if !l.Wait(time.Hour) || time.Since(start) != time.Second {
			t.Fatal("Wait after the last piece came back waited")
		}
	})
}
