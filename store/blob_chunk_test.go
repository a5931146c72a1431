package store

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// filledBlob returns a blob of size bytes holding the payload of id.
func filledBlob(t *testing.T, s *Store, id ID, size int) *Blob {
	t.Helper()
	b, err := s.CreateBlob(int64(size))
	if err != nil {
		t.Fatal(err)
	}
	copy(b.Bytes(), payload(id, size))
	return b
}

// A blob staged as a chunk becomes that chunk in place: the sealed chunk
// reads back from the blob's slot, the bytes move from BlobBytes to
// PayloadBytes with UsedBytes unchanged, freeing the blob keeps the chunk,
// and evicting the chunk then frees the slot.
func TestBlobBecomesAChunkWithoutACopy(t *testing.T) {
	s := openTest(t, testConfig(t, 8<<20))
	id := testID(1)
	b := filledBlob(t, s, id, 1<<20)
	used := s.Stats().UsedBytes
	w, err := b.StageChunk("ns", id, Checksum(payload(id, 1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.UsedBytes != used || st.BlobBytes != 0 || st.StagedBytes != 1<<20 || st.Blobs != 0 {
		t.Fatalf("stats after StageChunk: %+v", st)
	}
	if _, err := w.Write([]byte{1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Write to a complete staged blob: %v, want ErrInvalid", err)
	}
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.UsedBytes != used || st.PayloadBytes != 1<<20 || st.Chunks != 1 || st.StagedBytes != 0 {
		t.Fatalf("stats after Seal: %+v", st)
	}
	v, err := s.Get("ns", id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Location() != b.Location() || !bytes.Equal(v.Bytes(), b.Bytes()) {
		t.Fatalf("the chunk is at %+v, the blob at %+v", v.Location(), b.Location())
	}
	v.Release()
	if _, err := b.StageChunk("ns", testID(2), Checksum(b.Bytes())); !errors.Is(err, ErrBlobStaged) {
		t.Fatalf("a second StageChunk: %v, want ErrBlobStaged", err)
	}
	b.Free()
	b.Free()
	readBack(t, s, "ns", id, payload(id, 1<<20))
	if st := s.Stats(); st.UsedBytes != used {
		t.Fatalf("freeing the blob changed UsedBytes: %+v", st)
	}
	if err := s.Evict("ns", id); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.UsedBytes != 0 || st.Chunks != 0 {
		t.Fatalf("stats after evicting the chunk: %+v", st)
	}
}

// A chunk evicted while the blob still holds the slot keeps the slot (and
// the blob's bytes) until the blob is freed.
func TestEvictedChunkKeepsTheBlobsSlot(t *testing.T) {
	s := openTest(t, testConfig(t, 8<<20))
	id := testID(3)
	b := filledBlob(t, s, id, 256<<10)
	w, err := b.StageChunk("ns", id, Checksum(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.Evict("ns", id); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.UsedBytes == 0 || !bytes.Equal(b.Bytes(), payload(id, 256<<10)) {
		t.Fatalf("the blob lost its slot with the chunk: %+v", st)
	}
	b.Free()
	if st := s.Stats(); st.UsedBytes != 0 {
		t.Fatalf("UsedBytes after Free: %+v", st)
	}
}

// A wrong checksum, a chunk already held or staged leaves the blob a blob,
// counted as before; an aborted chunk frees its slot with the blob.
func TestBlobStagedAsChunkRefusals(t *testing.T) {
	s := openTest(t, testConfig(t, 8<<20))
	id := testID(4)
	b := filledBlob(t, s, id, 64<<10)
	defer b.Free()
	before := s.Stats()
	if _, err := b.StageChunk("ns", id, Checksum(b.Bytes())+1); !errors.Is(err, ErrChecksum) {
		t.Fatalf("wrong crc: %v, want ErrChecksum", err)
	}
	mustPut(t, s, "ns", testID(5), payload(testID(5), 1024))
	if _, err := b.StageChunk("ns", testID(5), Checksum(b.Bytes())); !errors.Is(err, ErrAlreadyHeld) {
		t.Fatalf("a held chunk: %v, want ErrAlreadyHeld", err)
	}
	other, err := s.Stage("ns", testID(6), 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.StageChunk("ns", testID(6), Checksum(b.Bytes())); !errors.Is(err, ErrBusy) {
		t.Fatalf("a chunk being staged: %v, want ErrBusy", err)
	}
	other.Abort()
	if st := s.Stats(); st.BlobBytes != before.BlobBytes || st.Blobs != 1 {
		t.Fatalf("a refused StageChunk changed the blob's accounting: %+v", st)
	}
	w, err := b.StageChunk("ns", id, Checksum(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if s.Contains("ns", id) || !bytes.Equal(b.Bytes(), payload(id, 64<<10)) {
		t.Fatal("the aborted chunk is held, or the blob lost its bytes")
	}
	b.Free()
	if st := s.Stats(); st.UsedBytes != classSize(1024) || st.StagedBytes != 0 {
		t.Fatalf("stats after the blob's Free: %+v", st)
	}
}

// A process the segment was handed to truncates it: reading a blob or a
// lent chunk through Blob.Read, View.Read or Guarded, and staging the blob
// as a chunk, fail with ErrFault instead of crashing the process.
func TestTruncatedSegmentUnderABlobFailsItsReaders(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 8<<20)
	cfg.SegmentSize = 1 << 20
	s := openTest(t, cfg)
	id := testID(9)
	mustPut(t, s, "ns", id, payload(id, 100<<10))
	v, err := s.Lend("ns", id)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	b := filledBlob(t, s, testID(10), 100<<10)
	defer b.Free()
	if b.Location().Segment != v.Location().Segment {
		t.Skip("the blob and the chunk landed in different segments")
	}
	if err := os.Truncate(s.arena.segmentPath(v.Location().Segment), 0); err != nil {
		t.Fatal(err)
	}
	var sum uint64
	read := func(p []byte) {
		for _, c := range p {
			sum += uint64(c)
		}
	}
	wantErr(t, b.Read(read), ErrFault)
	wantErr(t, v.Read(read), ErrFault)
	wantErr(t, Guarded(func() { read(b.Bytes()) }), ErrFault)
	_, err = b.StageChunk("ns", testID(10), Checksum(payload(testID(10), 100<<10)))
	wantErr(t, err, ErrFault)
}
