package store

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file planted at the next segment's path used to make every write that
// needed a new segment fail ("cannot create segment"), silently and for
// good: the arena never moved past the id. Now the path is skipped with one
// error line naming it and a count (Stats.SegmentPathsSkipped), the write
// lands in the next segment, and the planted file is left as it was.
func TestAPlantedFileAtTheNextSegmentPathIsSkipped(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	cfg := testConfig(t, 4<<20)
	cfg.SegmentSize = 64 << 10 // a new segment every few chunks
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s := openTest(t, cfg)
	var planted []string
	for _, id := range []uint32{1, 2, 4} {
		p := s.arena.segmentPath(id)
		if err := os.WriteFile(p, []byte("not a segment"), 0o600); err != nil {
			t.Fatal(err)
		}
		planted = append(planted, p)
	}
	for i := range 40 { // 16 KiB slots, four per segment: ten segments
		c := newSpec(uint64(i), 16<<10)
		if err := s.put("ns", c.id, c.data, Checksum(c.data)); err != nil {
			t.Fatalf("put %d with planted segment paths: %v", i, err)
		}
	}
	if n := s.Stats().SegmentPathsSkipped; n != 3 {
		t.Fatalf("Stats.SegmentPathsSkipped = %d, want 3", n)
	}
	for _, p := range planted {
		if b, err := os.ReadFile(p); err != nil || string(b) != "not a segment" {
			t.Fatalf("planted file %s changed: %q %v", p, b, err)
		}
		if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), filepath.Base(p)) {
			t.Fatalf("no error line names the skipped path %s:\n%s", p, logs.String())
		}
	}
}
