package store

import (
	"fmt"
	"testing"
)

// TestNamesArePagedInIDOrderAndSurviveARestart: chunks staged with a name
// are listed by Names in id order, page by page, filtered by namespace
// prefix, with and without a placement key, and so after a warm restart;
// Held and View report the name too.
func TestNamesArePagedInIDOrderAndSurviveARestart(t *testing.T) {
	cfg := testConfig(t, 4<<20)
	s := openTest(t, cfg)
	data := []byte("value")
	want := map[ID]string{}
	for i := range 50 {
		ns := "resp:a"
		if i%5 == 0 {
			ns = "other"
		}
		id := testID(uint64(100 + i))
		w, err := s.Stage(ns, id, int64(len(data)), Checksum(data))
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("key-%d", i)
		w.SetName(name)
		if i%2 == 0 {
			w.SetPlacement(testID(7))
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Seal(); err != nil {
			t.Fatal(err)
		}
		if ns == "resp:a" {
			want[id] = name
		}
	}
	if err := s.put("resp:a", testID(1), data, Checksum(data)); err != nil { // no name: not listed
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		got := map[ID]string{}
		var from []byte
		var last ID
		for pages := 0; ; pages++ {
			page, more := s.Names("resp:", from, 7)
			for _, c := range page {
				if string(c.ID[:]) <= string(last[:]) && len(got) > 0 {
					t.Fatalf("ids out of order: %s after %s", c.ID, last)
				}
				last, got[c.ID] = c.ID, c.Name
			}
			if !more {
				break
			}
			next := last // the id after the page's last: add 1 with carry
			for i := IDSize - 1; i >= 0; i-- {
				if next[i]++; next[i] != 0 {
					break
				}
			}
			from = next[:]
			if pages > 20 {
				t.Fatal("Names never ends")
			}
		}
		if len(got) != len(want) {
			t.Fatalf("listed %d names, want %d", len(got), len(want))
		}
		for id, n := range want {
			if got[id] != n {
				t.Fatalf("chunk %s listed as %q, want %q", id, got[id], n)
			}
		}
		for _, h := range s.Held() {
			if n, ok := want[h.ID]; ok && h.Name != n {
				t.Fatalf("Held lists %s with name %q", h.ID, h.Name)
			}
		}
		v, err := s.Get("resp:a", testID(101))
		if err != nil {
			t.Fatal(err)
		}
		defer v.Release()
		if v.Name() != "key-1" {
			t.Fatalf("View.Name = %q", v.Name())
		}
	}
	check(s)
	check(reopen(t, s, cfg))
}
