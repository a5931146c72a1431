package store

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// Allocator: size classes waste little, the budget is usable up to the
// limit, and memory freed by one size serves another.

// zeroChecksum is the CRC-32C of n zero bytes.
func zeroChecksum(n int64) uint32 {
	zeros := make([]byte, 1<<20)
	var crc uint32
	for n > 0 {
		k := min(n, int64(len(zeros)))
		crc = crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), zeros[:k])
		n -= k
	}
	return crc
}

// fillUniform seals chunks of one size until the next one no longer fits the
// budget, leaving their slots as they are (zero: a fresh sparse segment) so
// that large budgets cost little. Every chunk that fits must be accepted.
func fillUniform(t *testing.T, s *Store, ns string, size int64) int {
	t.Helper()
	crc := zeroChecksum(size)
	cs := classSize(size)
	n := 0
	for ; s.Stats().UsedBytes+cs <= s.Limit(); n++ {
		w, err := s.Stage(ns, testID(uint64(n)), size, crc)
		if err != nil {
			t.Fatalf("chunk %d of %d bytes refused with %d of %d bytes used: %v", n, size, s.Stats().UsedBytes, s.Limit(), err)
		}
		w.Bytes()
		if err := w.Seal(); err != nil {
			t.Fatalf("Seal of chunk %d: %v", n, err)
		}
	}
	return n
}

func TestUniformFillWastesAtMostFivePercent(t *testing.T) {
	t.Parallel()
	cases := []struct{ size, limit int64 }{
		{256 << 10, 32 << 20},       // a power of two: exact fit
		{300<<10 + 7, 32 << 20},     // just over a class step
		{1<<20 + 1, 64 << 20},       // just over a power of two: worst case
		{5<<20 - 17, 128 << 20},     // just under a class
		{48<<20 + 1, 256 << 20},     // large, just over a step
		{64 << 20, 512 << 20},       // the default MaxChunkSize
		{(3 << 20) / 2, 48<<20 + 5}, // a limit that is no multiple of the slot
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d_in_%d", tc.size, tc.limit), func(t *testing.T) {
			s := openTest(t, testConfig(t, tc.limit))
			n := fillUniform(t, s, "ns", tc.size)
			settle(s)
			st := s.Stats()
			waste := float64(st.WasteBytes()) / float64(st.UsedBytes)
			t.Logf("%d chunks, used %.1f%% of the limit, waste %.2f%%", n, 100*float64(st.UsedBytes)/float64(tc.limit), 100*waste)
			if st.Chunks != int64(n) || st.PayloadBytes != int64(n)*tc.size {
				t.Fatalf("Stats: %d chunks / %d bytes after %d puts", st.Chunks, st.PayloadBytes, n)
			}
			if waste > 0.05 {
				t.Fatalf("allocator waste %.2f%% > 5%%", 100*waste)
			}
			if st.UsedBytes < tc.limit*9/10 {
				t.Fatalf("only %d of %d bytes usable", st.UsedBytes, tc.limit)
			}
			// One more chunk: refused, or admitted in place of another; the
			// budget holds either way.
			w, err := s.Stage("ns", testID(1<<30), tc.size, zeroChecksum(tc.size))
			switch {
			case err == nil:
				w.Bytes()
				if err := w.Seal(); err != nil && !errors.Is(err, ErrRejected) {
					t.Fatalf("Seal of the extra chunk: %v", err)
				}
			case errors.Is(err, ErrRejected), errors.Is(err, ErrNoSpace):
			default:
				t.Fatalf("Stage of the extra chunk: %v", err)
			}
			settle(s)
			if st := s.Stats(); st.UsedBytes > tc.limit {
				t.Fatalf("UsedBytes %d over the limit %d", st.UsedBytes, tc.limit)
			}
		})
	}
}

func TestFreedMemoryServesAnotherSizeClass(t *testing.T) {
	t.Parallel()
	const limit = 64 << 20
	cfg := testConfig(t, limit)
	cfg.SegmentSize = 16 << 20
	s := openTest(t, cfg)
	rng := rand.NewChaCha8([32]byte{1})
	for phase, size := range []int{1<<20 + 1, 640<<10 + 3, 3 << 20, 256 << 10, 1<<20 + 1, 5<<20 - 1} {
		// Real bytes this time, so the pages are resident.
		data := make([]byte, size)
		rng.Read(data)
		ns := fmt.Sprint("phase", phase)
		cs := classSize(int64(size))
		var ids []ID
		for i := 0; s.Stats().UsedBytes+cs <= limit; i++ {
			data[0], data[1] = byte(i), byte(i>>8)
			id := testID(uint64(phase<<20 | i))
			if err := s.put(ns, id, data, Checksum(data)); err != nil {
				t.Fatalf("phase %d: chunk %d of %d bytes refused with %d of %d bytes used (%d retained): %v",
					phase, i, size, s.Stats().UsedBytes, limit, s.Stats().RetainedFreeBytes, err)
			}
			ids = append(ids, id)
		}
		settle(s)
		st := s.Stats()
		t.Logf("phase %d: %d chunks of %d bytes, used %d, retained %d, resident %d, %d segments",
			phase, len(ids), size, st.UsedBytes, st.RetainedFreeBytes, st.ResidentBytes, st.Segments)
		if st.UsedBytes < limit*9/10 {
			t.Fatalf("phase %d: only %d of %d bytes usable after churn", phase, st.UsedBytes, limit)
		}
		if st.UsedBytes+st.RetainedFreeBytes > limit {
			t.Fatalf("phase %d: used %d + retained %d over the limit", phase, st.UsedBytes, st.RetainedFreeBytes)
		}
		// Resident memory: the slots, plus at most the guard page of each
		// segment.
		if slack := int64(st.Segments) * pageSize; st.ResidentBytes > limit+slack {
			t.Fatalf("phase %d: %d bytes resident, limit %d + slack %d", phase, st.ResidentBytes, limit, slack)
		}
		// Every chunk is still intact before it goes.
		for i, id := range ids {
			if i%7 == 0 {
				data[0], data[1] = byte(i), byte(i>>8)
				readBack(t, s, ns, id, data)
			}
			if err := s.evict(ns, id); err != nil {
				t.Fatal(err)
			}
		}
		if st := s.Stats(); st.UsedBytes != 0 || st.Chunks != 0 {
			t.Fatalf("phase %d: after evicting everything: %+v", phase, st)
		}
	}
}

// TestPrefaultMakesAFreshSlotResident: a write into a slot that never held a
// chunk has its space allocated at Stage (fallocate) and asks the kernel for
// its pages in one call first; the pages are then resident, still zero, and
// the chunk written over them reads back intact.
func TestPrefaultMakesAFreshSlotResident(t *testing.T) {
	const size = 2 << 20
	cfg := testConfig(t, 64<<20)
	cfg.ExpectedChunkSize = size
	s := openTest(t, cfg)
	id := testID(1)
	data := payload(id, size)
	before := s.Stats().ResidentBytes
	w, err := s.Stage("ns", id, size, Checksum(data))
	if err != nil {
		t.Fatal(err)
	}
	if !w.fresh {
		t.Fatal("the first slot of a new store is not reported fresh")
	}
	s.prefault(w.buf)
	// A kernel before 5.14 refuses the advice: prefaulting turns off and
	// the write below must work all the same.
	if grew := s.Stats().ResidentBytes - before; !s.noPrefault.Load() && grew < size-2*pageSize {
		t.Fatalf("prefault made %d bytes resident, want about %d", grew, size)
	}
	for i, c := range w.buf {
		if c != 0 {
			t.Fatalf("prefault changed byte %d of a fresh slot to %#x", i, c)
		}
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("ns", id)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("the chunk written over prefaulted pages reads back different")
	}
}

// TestWriteBuffersTakesAFrameInPieces: a frame arriving in pieces of any size
// (gRPC's receive buffers) is written as their concatenation would be: the
// chunk seals (its checksum, computed across the pieces, matches) and reads
// back intact; pieces that would run past the chunk's size are refused
// whole, with nothing written.
func TestWriteBuffersTakesAFrameInPieces(t *testing.T) {
	t.Parallel()
	s := openTest(t, testConfig(t, 64<<20))
	rng := rand.New(rand.NewPCG(7, 8))
	for n := range 12 {
		id := testID(uint64(100 + n))
		size := 1 + rng.IntN(4<<20)
		data := payload(id, size)
		w, err := s.Stage("ns", id, int64(size), Checksum(data))
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < size; {
			var pieces [][]byte
			end := min(size, off+1+rng.IntN(1<<20))
			for p := off; p < end; {
				q := min(end, p+rng.IntN(17_000))
				pieces = append(pieces, data[p:q])
				p = q
			}
			if got, err := w.WriteBuffers(pieces); err != nil || got != end-off {
				t.Fatalf("chunk %d: WriteBuffers of %d bytes in %d pieces: %d, %v", n, end-off, len(pieces), got, err)
			}
			off = end
		}
		if _, err := w.WriteBuffers([][]byte{{1}, {2}}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("chunk %d: writing past the size: %v, want ErrInvalid", n, err)
		}
		if err := w.Seal(); err != nil {
			t.Fatalf("chunk %d (%d bytes): %v", n, size, err)
		}
		v, err := s.Get("ns", id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(v.Bytes(), data) {
			t.Fatalf("chunk %d reads back different", n)
		}
		v.Release()
	}
}

// TestStatsCountReusedAndFreshSlots: Stats says where slots came from: a
// free slot of the class (pages resident) or a clean one (pages new), and
// how many bytes of retained free slots were given back to make room.
func TestStatsCountReusedAndFreshSlots(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	cfg := testConfig(t, 4*mib)
	cfg.SegmentSize = 4 * mib
	s := openTest(t, cfg)
	data := make([]byte, mib)
	for i := range 4 {
		mustPut(t, s, "ns", testID(uint64(i)), data)
	}
	want := func(reused, fresh uint64, punched int64) {
		t.Helper()
		if st := s.Stats(); st.SlotsReused != reused || st.SlotsFresh != fresh || st.PunchedBytes != punched {
			t.Fatalf("Stats: %d reused, %d fresh, %d bytes punched; want %d, %d, %d",
				st.SlotsReused, st.SlotsFresh, st.PunchedBytes, reused, fresh, punched)
		}
	}
	want(0, 4, 0)
	if err := s.evict("ns", testID(0)); err != nil {
		t.Fatal(err)
	}
	resident := s.Stats().ResidentBytes
	mustPut(t, s, "ns", testID(10), data) // the freed slot of the class
	want(1, 4, 0)
	if st := s.Stats(); st.ResidentBytes != resident || resident < 4*mib {
		t.Fatalf("resident %d bytes after reusing a slot, %d before (4 MiB of slots)", st.ResidentBytes, resident)
	}
	if err := s.evict("ns", testID(1)); err != nil {
		t.Fatal(err)
	}
	small := make([]byte, 256<<10)
	mustPut(t, s, "ns", testID(11), small) // another class: the free 1 MiB slot's pages go first
	want(1, 5, mib)
	if st := s.Stats(); st.ResidentBytes > 3*mib+256<<10+int64(st.Segments)*pageSize {
		t.Fatalf("resident %d bytes with 3 MiB + 256 KiB of slots in %d segments", st.ResidentBytes, st.Segments)
	}
}
