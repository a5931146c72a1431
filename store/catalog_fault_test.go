package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
)

// A catalog write that fails keeps its changes pending: they land with the
// next write that succeeds, and a restart serves every chunk that was
// acknowledged. Stats counts the failures and Health reports the catalog
// while it cannot be written.
func TestFailedCatalogWriteKeepsItsRecordsUntilTheyLand(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 16<<20)
	s := openTest(t, cfg)
	universe := restartUniverse(12)
	for _, c := range universe[:4] {
		mustPut(t, s, "ns", c.id, c.data)
	}
	if err := s.FlushCatalog(); err != nil {
		t.Fatalf("FlushCatalog: %v", err)
	}

	injected := errors.New("injected: no space left on device")
	s.cat.setWriteFault(injected)
	for _, c := range universe[4:] {
		mustPut(t, s, "ns", c.id, c.data)
	}
	if err := s.evict("ns", universe[0].id); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.FlushCatalog(); !errors.Is(err, injected) {
			t.Fatalf("FlushCatalog with failing writes: %v, want the injected error", err)
		}
	}
	if st := s.Stats(); st.CatalogErrors != 2 {
		t.Fatalf("Stats.CatalogErrors = %d, want 2", st.CatalogErrors)
	}
	if err := s.Health(); !errors.Is(err, ErrCatalog) || !errors.Is(err, injected) {
		t.Fatalf("Health while the catalog fails: %v, want ErrCatalog wrapping the cause", err)
	}

	s.cat.setWriteFault(nil)
	if err := s.FlushCatalog(); err != nil {
		t.Fatalf("FlushCatalog after the fault cleared: %v", err)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("Health after the catalog recovered: %v", err)
	}
	s = reopen(t, s, cfg)
	held := quiescentCheck(t, s, "ns", universe)
	if len(held) != len(universe)-1 || held[universe[0].id] != nil {
		t.Fatalf("%d chunks held after the restart, want the %d acknowledged and not evicted", len(held), len(universe)-1)
	}
}

// The background loop retries a failed catalog write by itself (with
// backoff) until it succeeds.
func TestMaintenanceLoopRetriesAFailedCatalogWrite(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 16<<20)
	cfg.MaintenanceInterval = time.Hour // only the catalog's own timers run
	s := openTest(t, cfg)
	injected := errors.New("injected: I/O error")
	s.cat.setWriteFault(injected)
	universe := restartUniverse(6)
	for _, c := range universe {
		mustPut(t, s, "ns", c.id, c.data)
	}
	testutil.Eventually(t, "the catalog write to fail", 10*time.Second, func() bool {
		return s.Stats().CatalogErrors >= 2 // the first attempt and a retry
	})
	s.cat.setWriteFault(nil)
	testutil.Eventually(t, "the retried catalog write to land", 10*time.Second, func() bool {
		return s.Health() == nil && s.cat.pendingOps() == 0
	})
	s = reopen(t, s, cfg)
	if held := quiescentCheck(t, s, "ns", universe); len(held) != len(universe) {
		t.Fatalf("%d chunks held after the restart, want %d", len(held), len(universe))
	}
}

// A catalog on a full filesystem: writes fail with ENOSPC and stay pending;
// once space is freed they land, and nothing acknowledged is lost.
func TestCatalogOnAFullFilesystemCatchesUpWhenSpaceIsFreed(t *testing.T) {
	t.Parallel()
	data := mountTmpfs(t, "1m")
	cfg := testConfig(t, 16<<20)
	cfg.DataDir = data
	s := openTest(t, cfg)
	ballast := filepath.Join(data, "ballast")
	fillFile(t, ballast, 1<<20)
	// Enough chunks that their records need new catalog pages.
	var universe []*chunkSpec
	for i := range 400 {
		c := newSpec(uint64(i), 100)
		universe = append(universe, c)
		mustPut(t, s, "ns", c.id, c.data)
	}
	if err := s.FlushCatalog(); err == nil {
		t.Fatal("FlushCatalog on a full filesystem succeeded; the test needs it to fail")
	}
	if err := s.Health(); !errors.Is(err, ErrCatalog) {
		t.Fatalf("Health on a full filesystem: %v, want ErrCatalog", err)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushCatalog(); err != nil {
		t.Fatalf("FlushCatalog after space was freed: %v", err)
	}
	s = reopen(t, s, cfg)
	if held := quiescentCheck(t, s, "ns", universe); len(held) != len(universe) {
		t.Fatalf("%d chunks held after the restart, want %d", len(held), len(universe))
	}
}
