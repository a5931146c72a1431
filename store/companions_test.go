package store

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
)

// putNamed stores data as chunk sha256(name) of ns, named name (as the
// Redis port stores a value).
func putNamed(t *testing.T, s *Store, ns, name string, data []byte) {
	t.Helper()
	w, err := s.Stage(ns, sha256.Sum256([]byte(name)), int64(len(data)), Checksum(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	w.SetName(name)
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
}

// TestAChunkThePolicyEvictsTakesItsCompanions: with Config.Companions, the
// metadata of a value dies when the policy evicts its kv_bytes, so no
// metadata outlives the bytes it describes; without it, they are evicted
// apart.
func TestAChunkThePolicyEvictsTakesItsCompanions(t *testing.T) {
	t.Parallel()
	companions := func(name string) []ID {
		if stem, ok := strings.CutSuffix(name, "kv_bytes"); ok {
			return []ID{sha256.Sum256([]byte(stem + "metadata"))}
		}
		return nil
	}
	for _, with := range []bool{true, false} {
		cfg := testConfig(t, 4<<20)
		if with {
			cfg.Companions = companions
		}
		s := openTest(t, cfg)
		const n = 400 // 400 × 32 KiB: far more than the 4 MiB budget
		for i := range n {
			k := fmt.Sprintf("m@1@0@%x@half", i)
			putNamed(t, s, "resp:m", k+"kv_bytes", payload(testID(uint64(i)), 32<<10))
			putNamed(t, s, "resp:m", k+"metadata", []byte("28 bytes of metadata, more.."))
		}
		settle(s)
		orphans, kept := 0, 0
		for i := range n {
			k := fmt.Sprintf("m@1@0@%x@half", i)
			kv := s.Contains("resp:m", sha256.Sum256([]byte(k+"kv_bytes")))
			meta := s.Contains("resp:m", sha256.Sum256([]byte(k+"metadata")))
			if meta && !kv {
				orphans++
			}
			if kv && meta {
				kept++
			}
		}
		switch {
		case with && orphans > 0:
			t.Fatalf("with companions: %d metadata chunks outlived their kv_bytes", orphans)
		case !with && orphans == 0:
			t.Fatal("without companions no metadata outlived its kv_bytes: the test shows nothing")
		case kept == 0:
			t.Fatalf("with companions %v: no value kept whole", with)
		}
	}
}
