package localsock

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
)

// TestABlobHoarderCannotTakeTheMemory: a client that creates blobs and
// never seals them used to take the whole memory limit (256 unsealed 1 MiB
// blobs took 256 MiB, evicting sealed chunks, and everyone else's creates
// failed until it went). Now it holds at most its share of the unsealed-blob
// budget, and another client still creates and seals blobs.
func TestABlobHoarderCannotTakeTheMemory(t *testing.T) {
	t.Parallel()
	st := testStore(t, 32<<20)
	s := startServer(t, st, func(c *Config) {
		c.MaxUnsealedBytes = 16 << 20
		c.clientName = func(_ *net.UnixConn, seq uint64) string { return fmt.Sprintf("conn:%d", seq) }
	})
	hoarder, victim := dial(t, s), dial(t, s)
	held := 0
	for range 32 {
		if _, err := hoarder.CreateBlob(1 << 20); err != nil {
			wantErrCode(t, err, codeNotEnoughMemory)
			break
		}
		held++
	}
	if held != 12 {
		t.Fatalf("a client alone created %d unsealed blobs of 1 MiB in a 16 MiB budget, want 12 (three quarters)", held)
	}
	for i := range 4 {
		b, err := victim.CreateBlob(1 << 20)
		if err != nil {
			t.Fatalf("another client's blob %d while one hoards: %v", i, err)
		}
		if err := victim.Seal(b.ID); err != nil {
			t.Fatal(err)
		}
	}
	s.tab.mu.Lock()
	unsealed := s.tab.shares.bytes
	s.tab.mu.Unlock()
	if unsealed != 12<<20 {
		t.Fatalf("%d unsealed bytes counted, want the hoarder's 12 MiB (sealed blobs are not counted)", unsealed)
	}
	hoarder.Close() // its unsealed blobs go with it
	testutil.Eventually(t, "the hoarder's charge to be given back", 10*time.Second, func() bool {
		s.tab.mu.Lock()
		defer s.tab.mu.Unlock()
		return s.tab.shares.bytes == 0
	})
}
