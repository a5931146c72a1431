package store

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"log/slog"
	"testing"

	"github.com/kvring/kvring/internal/testutil"
)

// testConfig returns a config with its directories under the test's temp
// space: the catalog on disk, the segments in a fresh /dev/shm directory.
func testConfig(t testing.TB, limit int64) Config {
	t.Helper()
	shm := testutil.ShmDir(t, "store-")
	return Config{
		DataDir:             t.TempDir(),
		ShmDir:              shm,
		MemoryLimit:         limit,
		MaxStagedBytes:      limit, // the model tests may stage the whole budget; TestStagedBytesAreCapped checks the cap
		MaintenanceInterval: -1,
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func openTest(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testID derives a chunk id from a number.
func testID(n uint64) ID {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	return sha256.Sum256(b[:])
}

// payload returns size bytes derived from the id, so any read can be
// verified against the id alone.
func payload(id ID, size int) []byte {
	p := make([]byte, size)
	fillPayload(p, id)
	return p
}

func fillPayload(p []byte, id ID) {
	var seed [IDSize + 8]byte
	copy(seed[:], id[:])
	var block [32]byte
	for off, n := 0, uint64(0); off < len(p); off, n = off+32, n+1 {
		binary.LittleEndian.PutUint64(seed[IDSize:], n)
		block = sha256.Sum256(seed[:])
		copy(p[off:], block[:])
	}
}

func mustPut(t testing.TB, s *Store, ns string, id ID, data []byte) {
	t.Helper()
	if err := s.put(ns, id, data, Checksum(data)); err != nil {
		t.Fatalf("Put %s: %v", id, err)
	}
}
