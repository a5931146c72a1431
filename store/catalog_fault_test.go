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
	universe := restartUniverse(6)
	for _, c := range universe {
		mustPut(t, s, "ns", c.id, c.data)
	}
	if err := s.FlushCatalog(); err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected: I/O error")
	s.cat.setWriteFault(injected)
	if err := s.evict("ns", universe[0].id); err != nil { // a change for the loop to write
		t.Fatal(err)
	}
	testutil.Eventually(t, "the catalog write to fail", 10*time.Second, func() bool {
		return s.Stats().CatalogErrors >= 2 // the first attempt and a retry
	})
	s.cat.setWriteFault(nil)
	testutil.Eventually(t, "the retried catalog write to land", 10*time.Second, func() bool {
		return s.Health() == nil && s.cat.pendingOps() == 0
	})
	s = reopen(t, s, cfg)
	if held := quiescentCheck(t, s, "ns", universe); len(held) != len(universe)-1 || held[universe[0].id] != nil {
		t.Fatalf("%d chunks held after the restart, want the %d not evicted", len(held), len(universe)-1)
	}
}

// While the last catalog write failed the store takes no new chunk: Stage
// and Seal (of a chunk staged before the failure) are refused with
// ErrCatalog, since a restart would not serve what they sealed. Reads go on.
// Once a write succeeds, writes are taken again.
func TestWritesAreRefusedWhileTheCatalogCannotBeWritten(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 16<<20)
	s := openTest(t, cfg)
	universe := restartUniverse(4)
	mustPut(t, s, "ns", universe[0].id, universe[0].data)
	early, err := s.Stage("ns", universe[1].id, int64(len(universe[1].data)), Checksum(universe[1].data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := early.Write(universe[1].data); err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected: no space left on device")
	s.cat.setWriteFault(injected)
	if err := s.FlushCatalog(); !errors.Is(err, injected) {
		t.Fatalf("FlushCatalog: %v, want the injected error", err)
	}
	if _, err := s.Stage("ns", universe[2].id, int64(len(universe[2].data)), Checksum(universe[2].data)); !errors.Is(err, ErrCatalog) {
		t.Fatalf("Stage while the catalog cannot be written: %v, want ErrCatalog", err)
	}
	if err := early.Seal(); !errors.Is(err, ErrCatalog) {
		t.Fatalf("Seal while the catalog cannot be written: %v, want ErrCatalog", err)
	}
	if s.Contains("ns", universe[1].id) {
		t.Fatal("a chunk refused at its seal is held")
	}
	if v, err := s.Get("ns", universe[0].id); err != nil {
		t.Fatalf("a read while the catalog cannot be written: %v", err)
	} else {
		v.Release()
	}
	s.cat.setWriteFault(nil)
	if err := s.FlushCatalog(); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "ns", universe[3].id, universe[3].data)
}

// A catalog on a full filesystem: writes fail with ENOSPC and stay pending,
// and from the first failure no chunk is staged (ErrCatalog); once space is
// freed they land, and nothing sealed is lost.
func TestCatalogOnAFullFilesystemCatchesUpWhenSpaceIsFreed(t *testing.T) {
	t.Parallel()
	data := mountTmpfs(t, "1m")
	cfg := testConfig(t, 16<<20)
	cfg.DataDir = data
	s := openTest(t, cfg)
	ballast := filepath.Join(data, "ballast")
	testutil.FillFile(t, ballast, 1<<20)
	// Enough chunks that their records need new catalog pages; each
	// flushed as the node's commits do.
	var universe, sealed []*chunkSpec
	refused := 0
	for i := range 400 {
		c := newSpec(uint64(i), 100)
		universe = append(universe, c)
		if err := s.put("ns", c.id, c.data, Checksum(c.data)); err != nil {
			if !errors.Is(err, ErrCatalog) {
				t.Fatalf("put %d: %v, want ErrCatalog or success", i, err)
			}
			refused++
			continue
		}
		if err := s.FlushCatalog(); err == nil {
			sealed = append(sealed, c)
		}
	}
	if refused == 0 {
		t.Fatal("every put was taken on a full filesystem; the test needs catalog writes to fail")
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
	held := quiescentCheck(t, s, "ns", universe)
	for _, c := range sealed {
		if held[c.id] == nil {
			t.Fatalf("a chunk whose seal and catalog write succeeded is gone after the restart")
		}
	}
	t.Logf("%d puts recorded, %d refused while the catalog could not be written, %d held after the restart", len(sealed), refused, len(held))
}
