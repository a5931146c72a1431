package store

import (
	"errors"
	"testing"
	"time"
)

// TestDropNamespaceFreesItsChunksAndNoOthers: dropping a namespace removes
// its sealed chunks and frees exactly their slots; a pinned one goes when
// its pin ends; another namespace is untouched; an unknown one is
// ErrNotFound. Namespaces reports per-namespace usage.
func TestDropNamespaceFreesItsChunksAndNoOthers(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 8<<20))
	for i := range 5 {
		c := newSpec(uint64(i), 10_000)
		mustPut(t, s, "a", c.id, c.data)
	}
	keep := newSpec(99, 20_000)
	mustPut(t, s, "b", keep.id, keep.data)
	pinned := newSpec(0, 10_000)
	_, pin, err := s.Has("a", []ID{pinned.id}, time.Minute)
	if err != nil || pin == 0 {
		t.Fatalf("pin: %v %v", pin, err)
	}
	usage := s.Namespaces()
	if len(usage) != 2 || usage[0].Namespace != "a" || usage[0].Chunks != 5 || usage[0].Pinned != 1 || usage[1].Chunks != 1 {
		t.Fatalf("Namespaces = %+v", usage)
	}
	before := s.Stats().UsedBytes
	freed, err := s.DropNamespace("a")
	if err != nil {
		t.Fatal(err)
	}
	if freed.Chunks != 4 || freed.Pinned != 1 || freed.PayloadBytes != 40_000 {
		t.Fatalf("freed %+v, want 4 chunks (40000 bytes) and 1 pinned", freed)
	}
	if after := s.Stats().UsedBytes; before-after != freed.SlotBytes {
		t.Fatalf("used bytes fell by %d, freed reports %d", before-after, freed.SlotBytes)
	}
	if !s.Contains("b", keep.id) || !s.Contains("a", pinned.id) || s.Contains("a", newSpec(1, 10_000).id) {
		t.Fatal("wrong chunks left")
	}
	s.Release(pin)
	if s.Contains("a", pinned.id) {
		t.Fatal("the pinned chunk of the dropped namespace outlived its pin")
	}
	if _, err := s.DropNamespace("nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("drop of an unknown namespace: %v", err)
	}
}
