package transfer

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kvring/kvring/store"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

func TestSplitFramesCoversDataInOrderWithoutCopying(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 1, MaxFrameBytes - 1, MaxFrameBytes, MaxFrameBytes + 1, 3<<20 + 1<<19} {
		data := pattern(size, size)
		frames := collect(t, 7, data, 0)
		wantFrames := (size + MaxFrameBytes - 1) / MaxFrameBytes
		if len(frames) != wantFrames {
			t.Fatalf("size %d: %d frames, want %d", size, len(frames), wantFrames)
		}
		var off uint64
		for i, f := range frames {
			if f.Index != 7 || f.Offset != off || len(f.Data) == 0 || len(f.Data) > MaxFrameBytes {
				t.Fatalf("size %d: frame %d: index %d offset %d len %d, want index 7 offset %d len 1..%d",
					size, i, f.Index, f.Offset, len(f.Data), off, MaxFrameBytes)
			}
			if &f.Data[0] != &data[off] {
				t.Fatalf("size %d: frame %d is a copy, want a sub-slice of the data", size, i)
			}
			if cap(f.Data) != len(f.Data) {
				t.Fatalf("size %d: frame %d has capacity past its end: appending would overwrite the next frame", size, i)
			}
			off += uint64(len(f.Data))
		}
		if off != uint64(size) {
			t.Fatalf("size %d: frames cover %d bytes", size, off)
		}
	}
}

func TestSplitFramesHonoursMaxBytes(t *testing.T) {
	t.Parallel()
	frames := collect(t, 0, pattern(1, 10), 3)
	var lens []int
	for _, f := range frames {
		lens = append(lens, len(f.Data))
	}
	if len(lens) != 4 || lens[0] != 3 || lens[3] != 1 {
		t.Fatalf("frame lengths %v, want [3 3 3 1]", lens)
	}
	err := SplitFrames(0, pattern(1, 10), MaxFrameBytes+1, func(*kvringv1.DataFrame) error { return nil })
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("max above MaxFrameBytes: %v, want ErrInvalidArgument", err)
	}
}

func TestSplitFramesStopsAtEmitError(t *testing.T) {
	t.Parallel()
	boom := errors.New("send: broken pipe")
	calls := 0
	err := SplitFrames(0, pattern(1, 100), 10, func(*kvringv1.DataFrame) error {
		calls++
		if calls == 3 {
			return boom
		}
		return nil
	})
	if err != boom || calls != 3 {
		t.Fatalf("err %v after %d calls, want the emit error after 3", err, calls)
	}
}

// TestStoreChunkRoundTrip moves a chunk from one store to another the way a
// Fetch does: Get, SplitFrames, Assembler into a Staged slot, Seal.
func TestStoreChunkRoundTrip(t *testing.T) {
	t.Parallel()
	open := func() *store.Store {
		cfg := store.DefaultConfig(t.TempDir())
		cfg.ShmDir = t.TempDir()
		cfg.MemoryLimit = 64 << 20
		cfg.MaxChunkSize = 8 << 20
		cfg.MaintenanceInterval = -1
		s, err := store.Open(cfg)
		if err != nil {
			t.Fatalf("store.Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	src, dst := open(), open()
	data := pattern(9, 3<<20+1<<19)
	crc := store.Checksum(data)
	var id store.ID
	id[0] = 9
	sw, err := src.Stage("ns", id, int64(len(data)), crc)
	if err != nil {
		t.Fatalf("Stage: %v", err)
	}
	if _, err := sw.Write(data); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := sw.Seal(); err != nil {
		t.Fatalf("Seal: %v", err)
	}
	v, err := src.Get("ns", id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer v.Release()

	a := NewAssembler([]*kvringv1.ChunkRef{{Id: id[:], Size: uint64(len(data)), Crc32C: crc}}, map[uint32]bool{0: true})
	w, err := dst.Stage("ns", id, int64(len(data)), crc)
	if err != nil {
		t.Fatalf("Stage: %v", err)
	}
	if err := a.SetSink(0, w); err != nil {
		t.Fatal(err)
	}
	err = SplitFrames(0, v.Bytes(), 0, func(f *kvringv1.DataFrame) error {
		_, err := a.Add(f)
		return err
	})
	if err != nil {
		t.Fatalf("SplitFrames: %v", err)
	}
	if err := a.Finish(); err != nil || !a.Complete(0) {
		t.Fatalf("Finish: %v, complete %v", err, a.Complete(0))
	}
	if err := w.Seal(); err != nil {
		t.Fatalf("Seal: %v", err)
	}
	got, err := dst.Get("ns", id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer got.Release()
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("the copy differs from the original")
	}
}
