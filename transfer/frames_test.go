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

func TestSendChunkEmitsSplitFramesAndReturnsTheirChecksum(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 1, MaxFrameBytes, 3<<20 + 1<<19} {
		data := pattern(size, size)
		want := collect(t, 3, data, 0)
		var got []*kvringv1.DataFrame
		sum, err := SendChunk(3, fakeSource{data, store.Checksum(data)}, 0, func(f *kvringv1.DataFrame) error {
			got = append(got, f)
			return nil
		})
		if err != nil || sum != store.Checksum(data) {
			t.Fatalf("size %d: sum %08x, err %v; want %08x, nil", size, sum, err, store.Checksum(data))
		}
		if len(got) != len(want) {
			t.Fatalf("size %d: %d frames, want %d", size, len(got), len(want))
		}
		for i := range got {
			if got[i].Offset != want[i].Offset || &got[i].Data[0] != &want[i].Data[0] || len(got[i].Data) != len(want[i].Data) {
				t.Fatalf("size %d: frame %d differs from SplitFrames'", size, i)
			}
		}
	}
}

func TestSendChunkWithholdsLastFrameOfCorruptChunk(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, MaxFrameBytes, 2*MaxFrameBytes + 5} {
		data := pattern(size, size)
		actual := store.Checksum(data)
		sent := 0
		sum, err := SendChunk(1, fakeSource{data, actual ^ 1}, 0, func(f *kvringv1.DataFrame) error {
			sent += len(f.Data)
			return nil
		})
		if !errors.Is(err, store.ErrChecksum) {
			t.Fatalf("size %d: %v, want ErrChecksum", size, err)
		}
		if sum != actual {
			t.Fatalf("size %d: sum %08x, want the bytes' actual checksum %08x (for View.Corrupt)", size, sum, actual)
		}
		if sent >= size {
			t.Fatalf("size %d: %d bytes sent, want the last frame withheld", size, sent)
		}
	}
	if _, err := SendChunk(1, fakeSource{nil, 42}, 0, func(*kvringv1.DataFrame) error { return nil }); !errors.Is(err, store.ErrChecksum) {
		t.Fatalf("empty chunk with checksum 42: %v, want ErrChecksum", err)
	}
}

func TestSendChunkReturnsEmitError(t *testing.T) {
	t.Parallel()
	boom := errors.New("send: stream reset")
	data := pattern(2, 3*MaxFrameBytes)
	_, err := SendChunk(0, fakeSource{data, store.Checksum(data)}, 0, func(f *kvringv1.DataFrame) error {
		if f.Offset > 0 {
			return boom
		}
		return nil
	})
	if err != boom {
		t.Fatalf("%v, want the emit error", err)
	}
}

// TestStoreChunkRoundTrip moves a chunk from one store to another the way a
// Fetch does: Acquire, SendChunk, Assembler into a Staged slot, Seal.
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
	v, err := src.Acquire("ns", id)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
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
	sum, err := SendChunk(0, v, 0, func(f *kvringv1.DataFrame) error {
		_, err := a.Add(f)
		return err
	})
	if err != nil || sum != crc {
		t.Fatalf("SendChunk: sum %08x, %v", sum, err)
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
