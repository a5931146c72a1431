package store

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sys/unix"
)

// A blob's slot counts in UsedBytes and BlobBytes from CreateBlob to Free,
// its segment file shows the bytes written through the store's mapping, and
// a blob that does not fit is ErrNoSpace.
func TestBlobCountsInTheBudgetUntilFreed(t *testing.T) {
	s := openTest(t, testConfig(t, 4<<20))
	b, err := s.CreateBlob(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.UsedBytes < 1<<20 || st.BlobBytes != 1<<20 || st.Blobs != 1 || st.WasteBytes() < 0 {
		t.Fatalf("stats after CreateBlob: %+v", st)
	}
	copy(b.Bytes(), bytes.Repeat([]byte("kv"), 1<<19))
	loc := b.Location()
	f, size, err := s.SegmentFile(loc.Segment)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if size != loc.MapSize || loc.Offset+loc.Size+segmentGuard > size {
		t.Fatalf("location %+v, file size %d", loc, size)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if !bytes.Equal(mem[loc.Offset:loc.Offset+loc.Size], b.Bytes()) {
		t.Fatal("the segment file does not show the blob's bytes")
	}
	if sum, err := b.Checksum(); err != nil || sum != Checksum(b.Bytes()) {
		t.Fatalf("Checksum = %08x, %v", sum, err)
	}
	if _, err := s.CreateBlob(4 << 20); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("CreateBlob over the budget: %v, want ErrNoSpace", err)
	}
	if _, err := s.CreateBlob(0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("CreateBlob(0): %v, want ErrInvalid", err)
	}
	b.Free()
	b.Free()
	if st := s.Stats(); st.UsedBytes != 0 || st.BlobBytes != 0 || st.Blobs != 0 {
		t.Fatalf("stats after Free: %+v", st)
	}
}

// A blob that does not fit beside the chunks held has the policy evict the
// oldest chunks to make room, as a chunk's Stage does.
func TestBlobEvictsChunksToMakeRoom(t *testing.T) {
	s := openTest(t, testConfig(t, 4<<20))
	for i := range uint64(4) {
		data := payload(testID(i), 1<<20)
		if err := s.put("ns", testID(i), data, Checksum(data)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := s.CreateBlob(1 << 20)
	if err != nil {
		t.Fatalf("CreateBlob with the budget full of chunks: %v", err)
	}
	defer b.Free()
	if s.Contains("ns", testID(0)) || !s.Contains("ns", testID(3)) {
		t.Fatal("the oldest chunk was not the one evicted")
	}
	if st := s.Stats(); st.UsedBytes > st.LimitBytes {
		t.Fatalf("used %d over the limit %d", st.UsedBytes, st.LimitBytes)
	}
}

// TestPlaceholderHashIsTheHashOfItsName: the policy keys blob placeholders by
// the hash of "kvring-blob-placeholder-<n>", however it is built.
func TestPlaceholderHashIsTheHashOfItsName(t *testing.T) {
	for _, n := range []uint64{0, 1, 9, 10, 12345, 1<<64 - 1} {
		if got, want := placeholderHash(n), xxhash.Sum64String(fmt.Sprintf("kvring-blob-placeholder-%d", n)); got != want {
			t.Fatalf("placeholderHash(%d) = %x, want %x", n, got, want)
		}
	}
}
