package store

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// TestNamespaceRecordsSurviveRestartsAndALostSharedMemory: namespace
// records saved (and deleted) are read back at once, after a restart, and
// after a restart whose segments are gone (a host reboot discards the chunk
// catalog, not the namespace records); bad names and records are refused.
func TestNamespaceRecordsSurviveRestartsAndALostSharedMemory(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 16<<20)
	s := openTest(t, cfg)
	c := newSpec(1, 4096)
	mustPut(t, s, "ns", c.id, c.data) // a segment, for the reboot below
	for name, rec := range map[string]string{"llama": "record a", "qwen": "record b", "gone": "x"} {
		if err := s.SaveNamespaceRecord(name, []byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveNamespaceRecord("llama", []byte("record a2")); err != nil { // replaced
		t.Fatal(err)
	}
	if err := s.DeleteNamespaceRecord("gone"); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"llama": []byte("record a2"), "qwen": []byte("record b")}
	check := func(when string) {
		t.Helper()
		got, err := s.NamespaceRecords()
		if err != nil || !maps.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("%s: records %q, %v; want %q", when, got, err, want)
		}
	}
	check("before a catalog write")
	if err := s.FlushCatalog(); err != nil {
		t.Fatal(err)
	}
	check("after a catalog write")
	s = reopen(t, s, cfg)
	check("after a restart")

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(cfg.ShmDir, "kvring-*", "*.seg"))
	for _, p := range segs { // a host reboot empties /dev/shm
		os.Remove(p)
	}
	s = openTest(t, cfg)
	check("after the shared memory was lost")

	for _, bad := range []error{s.SaveNamespaceRecord("", nil), s.SaveNamespaceRecord(string(make([]byte, MaxNamespaceLen+1)), nil),
		s.SaveNamespaceRecord("big", make([]byte, maxNamespaceRecord+1))} {
		if !errors.Is(bad, ErrInvalid) {
			t.Fatalf("a bad name or record: %v, want ErrInvalid", bad)
		}
	}
}
