package store

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// FuzzDecodeChunkRecord: decoding any key and value either fails or yields a
// record that encodes back to exactly those bytes and that recovery can
// trust (a valid namespace, a slot and size in range).
func FuzzDecodeChunkRecord(f *testing.F) {
	id := testID(7)
	f.Add(keyBytes(chunkKeyBytes(3, 9)), encodeChunkValue("ns", 1000, 0xdeadbeef, id, nil, nil))
	f.Add(keyBytes(chunkKeyBytes(0, 0)), encodeChunkValue("a/b:c", 1, 0, ID{}, nil, nil))
	f.Add(keyBytes(chunkKeyBytes(2, 4)), encodeChunkValue("ns", 77, 1, id, &id, nil))
	name := "vllm@m@1@0@abckv_bytes"
	f.Add(keyBytes(chunkKeyBytes(2, 5)), encodeChunkValue("ns", 77, 1, id, &id, &name))
	f.Add(keyBytes(chunkKeyBytes(1, -1)), encodeChunkValue("ns", 0, 0, id, nil, nil))
	f.Add([]byte{1, 2, 3}, []byte("short"))
	f.Add(keyBytes(chunkKeyBytes(1, 1)), encodeChunkValue("bad ns!", 10, 0, id, nil, nil))
	f.Add(keyBytes(chunkKeyBytes(1, 1)), encodeChunkValue("", 10, 0, id, nil, nil))
	f.Fuzz(func(t *testing.T, k, v []byte) {
		r, err := decodeChunkRecord(k, v)
		if err != nil {
			return
		}
		if ValidateNamespace(r.ns) != nil || r.size == 0 || r.slot < 0 || r.slot >= maxSegmentSlots {
			t.Fatalf("decoded a record recovery cannot use: %+v", r)
		}
		key := chunkKeyBytes(r.seg, r.slot)
		if !bytes.Equal(key[:], k) || !bytes.Equal(encodeChunkValue(r.ns, r.size, r.crc, r.id, r.place, r.name), v) {
			t.Fatalf("record %+v does not encode back to %x / %x", r, k, v)
		}
	})
}

// FuzzDecodeSegmentRecord: decoding any key and value either fails or yields
// a segment of sane shape that encodes back to exactly those bytes.
func FuzzDecodeSegmentRecord(f *testing.F) {
	f.Add(keyBytes(segKey(1))[:4], encodeSegmentValue(1<<20, 64))
	f.Add(keyBytes(segKey(0))[:4], encodeSegmentValue(0, 1))
	f.Add(keyBytes(segKey(9))[:4], encodeSegmentValue(1<<40, 1<<30))
	f.Add([]byte{1}, []byte{})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		r, err := decodeSegmentRecord(k, v)
		if err != nil {
			return
		}
		if r.slotSize <= 0 || r.slotSize > maxSlotSize || r.nslots <= 0 || r.nslots > maxSegmentSlots {
			t.Fatalf("decoded a segment recovery cannot map: %+v", r)
		}
		if segmentFileSize(r.slotSize, r.nslots) <= 0 {
			t.Fatalf("segment %+v has file size %d", r, segmentFileSize(r.slotSize, r.nslots))
		}
		key := segKey(r.id)
		if !bytes.Equal(key[:4], k) || !bytes.Equal(encodeSegmentValue(r.slotSize, r.nslots), v) {
			t.Fatalf("segment %+v does not encode back to %x / %x", r, k, v)
		}
	})
}

// FuzzCatalogFile: a catalog file damaged anywhere (fill bytes b, then
// patch, written at off modulo the file's length) never stops the start
// and never crashes the process: Open succeeds, moving the file aside when
// it cannot be read, and the store takes a chunk.
func FuzzCatalogFile(f *testing.F) {
	// The base catalog's directories are removed at once: fuzz workers are
	// killed at the end of a run, before cleanups run.
	base := buildCatalog(f)
	// Inputs stay small (a run of one byte plus a patch) so that the fuzzer
	// minimizes what it finds quickly.
	f.Add(uint32(0), uint16(8192), byte(0xa5), []byte{})      // both meta pages
	f.Add(uint32(16), uint16(4), byte(0xff), []byte{})        // one meta page's magic
	f.Add(uint32(2*4096), uint16(4096), byte(0), []byte{})    // a data page zeroed
	f.Add(uint32(3*4096+8), uint16(0), byte(0), []byte{1, 0}) // page flags
	f.Add(uint32(4*4096+16), uint16(0), byte(0), []byte{0xff, 0xff, 0xff, 0x7f})
	f.Add(uint32(len(base)-1), uint16(0), byte(0), []byte{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	work := fuzzWorkDir(f)
	f.Fuzz(func(t *testing.T, off uint32, fill uint16, b byte, patch []byte) {
		file := bytes.Clone(base)
		at := int(off % uint32(len(file)))
		for i := at; i < min(at+int(fill), len(file)); i++ {
			file[i] = b
		}
		copy(file[at:], patch)
		c := Config{DataDir: filepath.Join(work, "data"), ShmDir: filepath.Join(work, "shm"), MemoryLimit: 16 << 20,
			MaintenanceInterval: -1, Logger: quiet}
		if err := os.RemoveAll(work); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(c.DataDir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.DataDir, "catalog.db"), file, 0o640); err != nil {
			t.Fatal(err)
		}
		s, err := Open(c)
		if err != nil {
			t.Fatalf("Open over a damaged catalog: %v", err)
		}
		defer s.Close()
		p := newSpec(1<<50, 100)
		if err := s.put("ns", p.id, p.data, Checksum(p.data)); err != nil {
			t.Fatalf("Put after opening a damaged catalog: %v", err)
		}
	})
}

// keyBytes returns a catalog key as a slice.
func keyBytes(k [8]byte) []byte { return k[:] }

// buildCatalog returns the bytes of the catalog of a store that held 300
// chunks, leaving no file behind.
func buildCatalog(f *testing.F) []byte {
	f.Helper()
	dir, err := os.MkdirTemp("", "kvring-fuzz-")
	if err != nil {
		f.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg := Config{DataDir: filepath.Join(dir, "data"), ShmDir: filepath.Join(dir, "shm"), MemoryLimit: 16 << 20,
		MaintenanceInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s, err := Open(cfg)
	if err != nil {
		f.Fatal(err)
	}
	for i := range 300 {
		c := newSpec(uint64(i), 100+i)
		if err := s.put("ns", c.id, c.data, Checksum(c.data)); err != nil {
			f.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	base, err := os.ReadFile(filepath.Join(cfg.DataDir, "catalog.db"))
	if err != nil {
		f.Fatal(err)
	}
	return base
}

// fuzzWorkDir returns a directory for one fuzzing process, reused by every
// input, and removes those of processes that are gone: the fuzzer kills its
// workers at the end of a run, before any cleanup, so a t.TempDir per input
// would be left behind.
func fuzzWorkDir(f *testing.F) string {
	f.Helper()
	prefix := filepath.Join(os.TempDir(), "kvring-fuzz-catalog-")
	old, _ := filepath.Glob(prefix + "*")
	for _, d := range old {
		pid, err := strconv.Atoi(strings.TrimPrefix(d, prefix))
		if err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(d)
		}
	}
	dir := prefix + strconv.Itoa(os.Getpid())
	f.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
