package store

import (
	"maps"
	"testing"
)

// TestPlacementKeysSurviveARestart: a chunk staged with a placement key is
// listed with it, and so after a warm restart; a chunk without one is
// listed as placed by its id.
func TestPlacementKeysSurviveARestart(t *testing.T) {
	cfg := testConfig(t, 1<<20)
	s := openTest(t, cfg)
	grouped, plain, group := testID(1), testID(2), testID(3)
	data := []byte("chunk bytes")
	w, err := s.Stage("ns", grouped, int64(len(data)), Checksum(data))
	if err != nil {
		t.Fatal(err)
	}
	w.SetPlacement(group)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.put("ns", plain, data, Checksum(data)); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		got := map[ID]HeldChunk{}
		for _, h := range s.Held() {
			got[h.ID] = h
		}
		each := map[ID]HeldChunk{}
		s.EachHeld(func(h HeldChunk) { each[h.ID] = h })
		if !maps.Equal(each, got) {
			t.Errorf("EachHeld lists %+v, Held %+v", each, got)
		}
		if h := got[grouped]; !h.Keyed || h.Place != group || h.Namespace != "ns" || h.Size != int64(len(data)) {
			t.Errorf("grouped chunk listed as %+v, want keyed by %s", h, group)
		}
		if h := got[plain]; h.Keyed || h.Place != plain {
			t.Errorf("plain chunk listed as %+v, want placed by its id", h)
		}
	}
	check(s)
	check(reopen(t, s, cfg))
}
