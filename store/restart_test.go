package store

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Warm restart: a new Store on the same DataDir and ShmDir serves what the
// old one held, and nothing else.

// reopen closes s and opens a new Store on the same directories.
func reopen(t *testing.T, s *Store, cfg Config) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return openTest(t, cfg)
}

// restartUniverse is a mix of sizes spanning several size classes and
// segments.
func restartUniverse(n int) []*chunkSpec {
	sizes := []int{1, 1000, 4096, 10000, 70001, 300 << 10}
	var u []*chunkSpec
	for i := range n {
		u = append(u, newSpec(uint64(i), sizes[i%len(sizes)]))
	}
	return u
}

func TestWarmRestartServesEveryChunkByteExact(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 64<<20)
	cfg.SegmentSize = 1 << 20
	s := openTest(t, cfg)
	universe := restartUniverse(60)
	for _, c := range universe {
		mustPut(t, s, "ns", c.id, c.data)
	}
	// Chunks evicted before the restart stay gone.
	for _, c := range universe[:5] {
		if err := s.evict("ns", c.id); err != nil {
			t.Fatal(err)
		}
	}
	before := s.Stats()
	node := s.NodeID()

	s = reopen(t, s, cfg)
	after := s.Stats()
	if s.NodeID() != node || after.NodeID != node {
		t.Fatalf("NodeID %q after restart, was %q", s.NodeID(), node)
	}
	if after.Chunks != before.Chunks || after.PayloadBytes != before.PayloadBytes || after.UsedBytes != before.UsedBytes {
		t.Fatalf("restart changed the accounting: %d chunks / %d bytes / %d used -> %d / %d / %d",
			before.Chunks, before.PayloadBytes, before.UsedBytes, after.Chunks, after.PayloadBytes, after.UsedBytes)
	}
	held := quiescentCheck(t, s, "ns", universe)
	if len(held) != len(universe)-5 {
		t.Fatalf("%d chunks held after restart, want %d", len(held), len(universe)-5)
	}
	for _, c := range universe[:5] {
		if s.Contains("ns", c.id) {
			t.Fatalf("chunk %v evicted before the restart is held again", c)
		}
	}
	// The restarted store takes new chunks, reusing the recovered segments
	// without overlapping the recovered chunks.
	extra := restartUniverse(70)[60:]
	for i, c := range extra {
		c = newSpec(uint64(1000+i), c.size)
		extra[i] = c
		mustPut(t, s, "ns", c.id, c.data)
	}
	quiescentCheck(t, s, "ns", append(universe, extra...))

	// And a second restart serves old and new chunks alike.
	s = reopen(t, s, cfg)
	if got := quiescentCheck(t, s, "ns", append(universe, extra...)); len(got) != len(universe)-5+len(extra) {
		t.Fatalf("%d chunks held after the second restart", len(got))
	}
}

func TestRestartWithoutSegmentsDiscardsCatalogWithLogLine(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 16<<20)
	s := openTest(t, cfg)
	universe := restartUniverse(10)
	for _, c := range universe {
		mustPut(t, s, "ns", c.id, c.data)
	}
	node := s.NodeID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A host reboot empties /dev/shm.
	segs, err := filepath.Glob(filepath.Join(cfg.ShmDir, "kvring-*", "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment files to delete (%v)", err)
	}
	for _, p := range segs {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s = openTest(t, cfg)
	if !strings.Contains(logs.String(), "catalog discarded") {
		t.Fatalf("no log line says the catalog was discarded; logs:\n%s", logs.String())
	}
	if s.NodeID() != node {
		t.Fatal("the node identity did not survive the discarded catalog")
	}
	if held := quiescentCheck(t, s, "ns", universe); len(held) != 0 {
		t.Fatalf("%d chunks held without their segments", len(held))
	}
	// The store is usable, and the next restart no longer finds a stale
	// catalog.
	for _, c := range universe[:3] {
		mustPut(t, s, "ns", c.id, c.data)
	}
	s = reopen(t, s, cfg)
	if held := quiescentCheck(t, s, "ns", universe); len(held) != 3 {
		t.Fatalf("%d chunks held after a clean restart, want 3", len(held))
	}
}

func TestRestartDropsChunkCorruptedWhileDown(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 16<<20)
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s := openTest(t, cfg)
	universe := restartUniverse(12)
	for _, c := range universe {
		mustPut(t, s, "ns", c.id, c.data)
	}
	victim := universe[4]
	v, err := s.Get("ns", victim.id)
	if err != nil {
		t.Fatal(err)
	}
	loc := v.Location()
	v.Release()
	path := s.arena.segmentPath(loc.Segment)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{^victim.data[victim.size/2]}, loc.Offset+int64(victim.size/2)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	s = openTest(t, cfg)
	if s.Contains("ns", victim.id) {
		t.Fatal("a chunk corrupted while the store was down is served")
	}
	if !strings.Contains(logs.String(), "failed verification") {
		t.Fatalf("no log line about the dropped chunk; logs:\n%s", logs.String())
	}
	held := quiescentCheck(t, s, "ns", universe)
	if len(held) != len(universe)-1 {
		t.Fatalf("%d chunks held, want %d", len(held), len(universe)-1)
	}
	// The dropped chunk's slot is free for a new write of it.
	mustPut(t, s, "ns", victim.id, victim.data)
	readBack(t, s, "ns", victim.id, victim.data)
}

func TestRestartDoesNotServeStagedChunks(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 16<<20)
	s := openTest(t, cfg)
	sealed, complete, partial, direct := newSpec(1, 5000), newSpec(2, 5000), newSpec(3, 5000), newSpec(4, 5000)
	mustPut(t, s, "ns", sealed.id, sealed.data)
	stageWrite(t, s, "ns", complete, complete.size, 1000) // every byte written, never sealed
	stageWrite(t, s, "ns", partial, 100, 100)
	w, err := s.Stage("ns", direct.id, int64(direct.size), Checksum(direct.data))
	if err != nil {
		t.Fatal(err)
	}
	copy(w.Bytes(), direct.data)

	s = reopen(t, s, cfg)
	universe := []*chunkSpec{sealed, complete, partial, direct}
	held := quiescentCheck(t, s, "ns", universe)
	if len(held) != 1 || held[sealed.id] == nil {
		t.Fatalf("after restart %d chunks held; want only the sealed one", len(held))
	}
	for _, c := range universe[1:] {
		if _, err := s.Get("ns", c.id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of a chunk staged before the restart: %v, want ErrNotFound", err)
		}
		mustPut(t, s, "ns", c.id, c.data)
	}
	if held := quiescentCheck(t, s, "ns", universe); len(held) != 4 {
		t.Fatalf("%d chunks held, want 4", len(held))
	}
}

func TestCatalogIsOwnedByOneStore(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 16<<20)
	openTest(t, cfg)
	second := cfg
	second.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if s, err := Open(second); err == nil {
		s.Close()
		t.Fatal("a second Store opened a catalog another one holds")
	} else if !strings.Contains(err.Error(), "catalog") {
		t.Fatalf("error does not name the catalog: %v", err)
	}
}
