package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// segmentPathOf returns the file of the segment holding the chunk.
func segmentPathOf(t *testing.T, s *Store, ns string, id ID) string {
	t.Helper()
	v, err := s.Get(ns, id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	defer v.Release()
	return s.arena.segmentPath(v.Location().Segment)
}

// A store whose shm filesystem is smaller than its memory limit (allowed
// explicitly) fills the filesystem, then refuses further writes with
// ErrNoSpace, keeps serving what it holds, and takes writes again once
// space is freed. Before space was allocated up front, the copy into the
// mapping died of SIGBUS.
func TestFullShmFilesystemRefusesWritesWithErrNoSpace(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 256<<20)
	cfg.ShmDir = mountTmpfs(t, "16m")
	cfg.AllowShmOvercommit = true
	s := openTest(t, cfg)
	const size = 1 << 20
	var held []*chunkSpec
	var refused error
	for i := range 40 {
		c := newSpec(uint64(i), size)
		w, err := s.Stage("ns", c.id, size, Checksum(c.data))
		if err == nil {
			_, err = w.Write(c.data)
			if err == nil {
				err = w.Seal()
			} else {
				w.Abort()
			}
		}
		if err != nil {
			refused = err
			break
		}
		held = append(held, c)
	}
	if refused == nil {
		t.Fatal("40 MiB of chunks fit a 16 MiB filesystem")
	}
	wantErr(t, refused, ErrNoSpace)
	if len(held) < 8 {
		t.Fatalf("only %d chunks of 1 MiB fit a 16 MiB filesystem", len(held))
	}
	if st := s.Stats(); st.Rejections[ReasonNoSpace] != 1 {
		t.Fatalf("rejections %v, want one for no space", st.Rejections)
	}
	for _, c := range held {
		readBack(t, s, "ns", c.id, c.data)
	}
	// Freed space is usable again.
	for _, c := range held[:2] {
		if err := s.evict("ns", c.id); err != nil {
			t.Fatal(err)
		}
	}
	c := newSpec(1000, size)
	mustPut(t, s, "ns", c.id, c.data)
	readBack(t, s, "ns", c.id, c.data)
}

// Open refuses a memory limit that the shm filesystem could never hold,
// naming both sizes, unless AllowShmOvercommit says the operator knows.
func TestOpenRefusesALimitLargerThanTheShmFilesystem(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 256<<20)
	cfg.ShmDir = mountTmpfs(t, "16m")
	_, err := Open(cfg)
	wantErr(t, err, ErrInvalid, "268435456", "16777216", "AllowShmOvercommit")
	cfg.AllowShmOvercommit = true
	openTest(t, cfg)
}

// A segment file truncated under a running store: reading a chunk whose
// pages are gone is an error (ErrChecksum wrapping ErrFault; the chunk is
// dropped), not a crash of the process, and writing into that segment is
// refused. Before, the read died of SIGBUS in Checksum.
func TestTruncatedSegmentFailsReadsAndWritesInsteadOfCrashing(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 8<<20)
	cfg.SegmentSize = 1 << 20
	s := openTest(t, cfg)
	a, b := newSpec(1, 100<<10), newSpec(2, 100<<10)
	mustPut(t, s, "ns", a.id, a.data)
	w := stageWrite(t, s, "ns", b, 0, 1)
	path := segmentPathOf(t, s, "ns", a.id)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get("ns", a.id)
	wantErr(t, err, ErrChecksum)
	wantErr(t, err, ErrFault)
	if s.Contains("ns", a.id) {
		t.Fatal("a chunk whose pages are gone is still held")
	}
	// The staged chunk still holds a slot of the lost segment.
	if err := s.Health(); !errors.Is(err, ErrSegmentLost) {
		t.Fatalf("Health with a truncated segment: %v, want ErrSegmentLost", err)
	}
	if _, err := w.Write(b.data); err == nil {
		if err := w.Seal(); err == nil {
			t.Fatal("a chunk written into a truncated segment was sealed")
		}
	} else {
		wantErr(t, err, ErrSegmentLost)
		wantErr(t, err, ErrFault)
	}
	w.Abort()
	st := s.Stats()
	if st.SegmentsLost != 1 || st.Evictions[ReasonLost] != 1 {
		t.Fatalf("SegmentsLost %d, evictions %v; want 1 lost segment and 1 chunk", st.SegmentsLost, st.Evictions)
	}
	// Once the lost segment holds nothing it is released: healthy again.
	if err := s.Health(); err != nil {
		t.Fatalf("Health once the lost segment is empty: %v", err)
	}
	// New writes go to a new segment.
	mustPut(t, s, "ns", b.id, b.data)
	readBack(t, s, "ns", b.id, b.data)
}

// Segment files deleted under a running store: writes into them are no
// longer acknowledged (the seal fails and the next try lands in a new
// segment), Health reports the lost segments while they hold chunks, and
// every chunk acknowledged after the deletion is served after a restart.
func TestDeletedSegmentsStopAcknowledgingWrites(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 8<<20)
	cfg.SegmentSize = 1 << 20
	s := openTest(t, cfg)
	var before []*chunkSpec
	for i := range 4 {
		c := newSpec(uint64(i), 100<<10)
		before = append(before, c)
		mustPut(t, s, "ns", c.id, c.data)
	}
	names, err := filepath.Glob(filepath.Join(cfg.ShmDir, "kvring-*", "kvring-*.seg"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no segment files: %v", err)
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	var acked []*chunkSpec
	var refused int
	for i := range 8 {
		c := newSpec(uint64(100+i), 100<<10)
		err := s.put("ns", c.id, c.data, Checksum(c.data))
		switch {
		case err == nil:
			acked = append(acked, c)
		case errors.Is(err, ErrSegmentLost):
			refused++
		default:
			t.Fatalf("Put into a deleted segment: %v, want success or ErrSegmentLost", err)
		}
	}
	if refused == 0 || len(acked) == 0 {
		t.Fatalf("%d puts refused, %d acknowledged; want the first refused and later ones in a new segment", refused, len(acked))
	}
	if err := s.Health(); !errors.Is(err, ErrSegmentLost) {
		t.Fatalf("Health with deleted segments: %v, want ErrSegmentLost", err)
	}
	if st := s.Stats(); st.SegmentsLost != uint64(len(names)) {
		t.Fatalf("Stats.SegmentsLost = %d, want %d", st.SegmentsLost, len(names))
	}
	// The chunks of the lost segments are still readable until they go.
	for _, c := range before {
		readBack(t, s, "ns", c.id, c.data)
	}
	for _, c := range before {
		if err := s.evict("ns", c.id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Health(); err != nil {
		t.Fatalf("Health once the lost segments hold nothing: %v", err)
	}
	s = reopen(t, s, cfg)
	for _, c := range acked {
		readBack(t, s, "ns", c.id, c.data)
	}
}

// The maintenance pass finds a deleted segment without a write.
func TestMaintenanceFindsADeletedSegment(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 8<<20)
	s := openTest(t, cfg)
	c := newSpec(1, 1000)
	mustPut(t, s, "ns", c.id, c.data)
	if err := os.Remove(segmentPathOf(t, s, "ns", c.id)); err != nil {
		t.Fatal(err)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("Health before the check: %v", err)
	}
	s.checkSegments()
	if err := s.Health(); !errors.Is(err, ErrSegmentLost) {
		t.Fatalf("Health after the check: %v, want ErrSegmentLost", err)
	}
}
