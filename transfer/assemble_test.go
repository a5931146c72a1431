package transfer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// A store's Staged is a BuffersSink (transfer itself does not import the
// store).
var _ BuffersSink = (*store.Staged)(nil)

// assemble feeds frames to a new Assembler for chunks with buffer sinks on
// the needed ones and returns the sinks.
func assemble(t *testing.T, chunks [][]byte, need []uint32, frames []*kvringv1.DataFrame) (*Assembler, map[uint32]*bufSink) {
	t.Helper()
	a := NewAssembler(refs(chunks), set(need...))
	sinks := map[uint32]*bufSink{}
	for _, i := range need {
		sinks[i] = &bufSink{}
		if err := a.SetSink(i, sinks[i]); err != nil {
			t.Fatalf("SetSink(%d): %v", i, err)
		}
	}
	for _, f := range frames {
		s, err := a.Add(f)
		if err != nil {
			t.Fatalf("Add(chunk %d, offset %d): %v", f.Index, f.Offset, err)
		}
		if want, ok := sinks[f.Index]; ok && s != want {
			t.Fatalf("Add(chunk %d) routed to %v, want the chunk's sink", f.Index, s)
		}
	}
	return a, sinks
}

func TestSplitAssembleRoundTrip(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 1, MaxFrameBytes - 1, MaxFrameBytes, MaxFrameBytes + 1, 3<<20 + 1<<19} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			t.Parallel()
			data := pattern(size, size)
			a, sinks := assemble(t, [][]byte{data}, []uint32{0}, collect(t, 0, data, 0))
			if err := a.Finish(); err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if !a.Complete(0) || !bytes.Equal(sinks[0].Bytes(), data) {
				t.Fatalf("complete %v, %d bytes assembled, want %d equal bytes", a.Complete(0), sinks[0].Len(), size)
			}
		})
	}
}

// TestInterleavedChunksAssemble interleaves the frames of many chunks at
// random (each chunk's frames staying in order), with frames of chunks that
// are not needed among them.
func TestInterleavedChunksAssemble(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 40
	chunks := make([][]byte, n)
	queues := make([][]*kvringv1.DataFrame, n)
	var need []uint32
	for i := range chunks {
		chunks[i] = pattern(i, 1+rng.IntN(20_000))
		maxBytes := 1 + rng.IntN(4096)
		if i == 0 {
			chunks[i] = pattern(i, 2*MaxFrameBytes+3)
			maxBytes = 0
		}
		queues[i] = collect(t, uint32(i), chunks[i], maxBytes)
		if i%3 != 1 {
			need = append(need, uint32(i))
		}
	}
	var frames []*kvringv1.DataFrame
	for {
		var open []int
		for i, q := range queues {
			if len(q) > 0 {
				open = append(open, i)
			}
		}
		if len(open) == 0 {
			break
		}
		i := open[rng.IntN(len(open))]
		frames = append(frames, queues[i][0])
		queues[i] = queues[i][1:]
	}

	a, sinks := assemble(t, chunks, need, frames)
	if err := a.Finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	for i := range chunks {
		s, needed := sinks[uint32(i)]
		if needed != a.Complete(uint32(i)) {
			t.Fatalf("chunk %d: needed %v, complete %v", i, needed, a.Complete(uint32(i)))
		}
		if needed && !bytes.Equal(s.Bytes(), chunks[i]) {
			t.Fatalf("chunk %d: assembled bytes differ", i)
		}
	}
}

func TestBadFramesNameTheField(t *testing.T) {
	t.Parallel()
	// Chunk 0 is 8 bytes, chunk 1 is 3 MiB; chunk 2 (4 bytes) is not needed.
	sizes := []uint64{8, 3 << 20, 4}
	frame := func(index uint32, offset uint64, n int) *kvringv1.DataFrame {
		return &kvringv1.DataFrame{Index: index, Offset: offset, Data: make([]byte, n)}
	}
	cases := []struct {
		name  string
		prior []*kvringv1.DataFrame
		bad   *kvringv1.DataFrame
		field string
	}{
		{"nil frame", nil, nil, "data:"},
		{"index out of range", nil, frame(3, 0, 1), "data.index:"},
		{"huge index", nil, frame(^uint32(0), 0, 1), "data.index:"},
		{"empty data", nil, frame(0, 0, 0), "data.data:"},
		{"oversized data", nil, frame(1, 0, MaxFrameBytes+1), "data.data:"},
		{"first frame not at 0", nil, frame(0, 1, 1), "data.offset:"},
		{"gap", []*kvringv1.DataFrame{frame(0, 0, 2)}, frame(0, 3, 1), "data.offset:"},
		{"overlap", []*kvringv1.DataFrame{frame(0, 0, 2)}, frame(0, 1, 2), "data.offset:"},
		{"repeat", []*kvringv1.DataFrame{frame(0, 0, 2)}, frame(0, 0, 2), "data.offset:"},
		{"past size", []*kvringv1.DataFrame{frame(0, 0, 2)}, frame(0, 2, 7), "data.data:"},
		{"after complete", []*kvringv1.DataFrame{frame(0, 0, 8)}, frame(0, 8, 1), "data.data:"},
		{"huge offset", nil, frame(0, ^uint64(0), 1), "data.offset:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			chunkRefs := make([]*kvringv1.ChunkRef, len(sizes))
			for i, s := range sizes {
				chunkRefs[i] = &kvringv1.ChunkRef{Size: s}
			}
			a := NewAssembler(chunkRefs, set(0, 1))
			sinks := []*bufSink{{}, {}}
			for i, s := range sinks {
				a.SetSink(uint32(i), s)
			}
			for _, f := range c.prior {
				if _, err := a.Add(f); err != nil {
					t.Fatalf("prior frame: %v", err)
				}
			}
			before := sinks[0].Len() + sinks[1].Len()
			s, err := a.Add(c.bad)
			if !errors.Is(err, ErrBadFrame) || s != nil {
				t.Fatalf("Add: sink %v, %v; want nil, ErrBadFrame", s, err)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Fatalf("%q does not name the field %q", err, c.field)
			}
			if after := sinks[0].Len() + sinks[1].Len(); after != before {
				t.Fatalf("a bad frame wrote %d bytes", after-before)
			}
			if Code(err) != codes.InvalidArgument || Code(ToStatus(err)) != codes.InvalidArgument {
				t.Fatalf("code %v, want InvalidArgument", Code(err))
			}
		})
	}
}

func TestFramesOfUnneededChunksAreIgnored(t *testing.T) {
	t.Parallel()
	a := NewAssembler(refs([][]byte{make([]byte, 10), make([]byte, 10)}), set(1))
	sink := &bufSink{}
	a.SetSink(1, sink)
	// Even frames that would be bad for a needed chunk: they are not read.
	for _, f := range []*kvringv1.DataFrame{
		{Index: 0, Offset: 0, Data: []byte("abc")},
		{Index: 0, Offset: 99, Data: nil},
		{Index: 0, Offset: 0, Data: make([]byte, MaxFrameBytes+1)},
	} {
		if s, err := a.Add(f); s != nil || err != nil {
			t.Fatalf("frame of an unneeded chunk: %v, %v; want nil, nil", s, err)
		}
	}
	if sink.Len() != 0 || a.Complete(0) || len(a.Missing()) != 1 {
		t.Fatalf("an ignored frame changed state: sink %d bytes, complete(0) %v, missing %v", sink.Len(), a.Complete(0), a.Missing())
	}
	if err := a.SetSink(0, sink); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("SetSink on an unneeded chunk: %v, want ErrInvalidArgument", err)
	}
}

func TestMissingAfterEarlyEnd(t *testing.T) {
	t.Parallel()
	chunks := [][]byte{pattern(0, 100), pattern(1, 4096), pattern(2, 0), pattern(3, 50), pattern(4, 7)}
	var frames []*kvringv1.DataFrame
	frames = append(frames, collect(t, 0, chunks[0], 0)...)
	frames = append(frames, collect(t, 1, chunks[1], 1000)[:2]...) // 2000 of 4096
	frames = append(frames, collect(t, 4, chunks[4], 0)...)        // not needed
	a, _ := assemble(t, chunks, []uint32{0, 1, 2, 3}, frames)
	if got := a.Missing(); !slices.Equal(got, []uint32{1, 3}) {
		t.Fatalf("Missing %v, want [1 3]", got)
	}
	if !a.Complete(0) || !a.Complete(2) || a.Complete(1) || a.Complete(4) {
		t.Fatal("Complete disagrees with Missing")
	}
	err := a.Finish()
	if !errors.Is(err, ErrIncompleteStream) {
		t.Fatalf("Finish: %v, want ErrIncompleteStream", err)
	}
	for _, want := range []string{"chunk 1 has 2000 of 4096 bytes", "chunk 3 has 0 of 50 bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q does not say %q", err, want)
		}
	}
	if Code(err) != codes.InvalidArgument {
		t.Fatalf("code %v, want InvalidArgument", Code(err))
	}
}

func TestFinishSummarizesManyShortChunks(t *testing.T) {
	t.Parallel()
	chunks := make([][]byte, 20)
	need := make([]uint32, 20)
	for i := range chunks {
		chunks[i], need[i] = make([]byte, 5), uint32(i)
	}
	a, _ := assemble(t, chunks, need, nil)
	err := a.Finish()
	if !strings.Contains(err.Error(), "chunk 7 has 0 of 5 bytes, and 12 more") || strings.Contains(err.Error(), "chunk 8 ") {
		t.Fatalf("%q: want the first %d chunks named and the rest counted", err, maxListed)
	}
}

func TestSinkErrorFailsOnlyItsChunk(t *testing.T) {
	t.Parallel()
	for _, short := range []bool{false, true} {
		chunks := [][]byte{pattern(0, 300), pattern(1, 300)}
		a := NewAssembler(refs(chunks), set(0, 1))
		bad, good := &failSink{failAt: 1, short: short}, &bufSink{}
		a.SetSink(0, bad)
		a.SetSink(1, good)
		f0, f1 := collect(t, 0, chunks[0], 100), collect(t, 1, chunks[1], 100)
		var sinkErr error
		for i := range f0 {
			if s, err := a.Add(f0[i]); err != nil {
				if sinkErr != nil {
					t.Fatalf("frame after the sink failed: %v", err)
				}
				if s != bad || errors.Is(err, ErrBadFrame) {
					t.Fatalf("sink error: sink %v, %v; want the failing sink and not ErrBadFrame", s, err)
				}
				sinkErr = err
			}
			if _, err := a.Add(f1[i]); err != nil {
				t.Fatalf("the other chunk: %v", err)
			}
		}
		want := errSink
		if short {
			want = io.ErrShortWrite
		}
		if !errors.Is(sinkErr, want) || !errors.Is(a.Err(0), want) {
			t.Fatalf("short %v: Add %v, Err %v; want %v", short, sinkErr, a.Err(0), want)
		}
		if bad.got != 100 {
			t.Fatalf("the failed sink got %d bytes after failing, want 100 before", bad.got)
		}
		if a.Complete(0) || !a.Complete(1) || !bytes.Equal(good.Bytes(), chunks[1]) {
			t.Fatal("the failure spread to the other chunk")
		}
		if len(a.Missing()) != 0 || a.Finish() != nil {
			t.Fatalf("a failed chunk is reported by Err, not Missing: %v, %v", a.Missing(), a.Finish())
		}
	}
}

func TestAssemblerMisuse(t *testing.T) {
	t.Parallel()
	chunks := append(refs([][]byte{make([]byte, 4), make([]byte, 4), make([]byte, 4)}), nil)
	// Index 1 is false, 3 has no descriptor, 9 is out of range: none needed.
	a := NewAssembler(chunks, map[uint32]bool{0: true, 1: false, 3: true, 9: true})
	for _, idx := range []uint32{1, 3, 9} {
		if err := a.SetSink(idx, &bufSink{}); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("SetSink(%d): %v, want ErrInvalidArgument", idx, err)
		}
	}
	if got := a.Missing(); !slices.Equal(got, []uint32{0}) {
		t.Fatalf("Missing %v, want [0]", got)
	}
	_, err := a.Add(&kvringv1.DataFrame{Index: 0, Data: []byte{1}})
	if err == nil || errors.Is(err, ErrBadFrame) {
		t.Fatalf("frame without a sink: %v, want a caller error that is not ErrBadFrame", err)
	}
	if a.Complete(5) || a.Err(5) != nil {
		t.Fatal("out-of-range index reported as complete or failed")
	}
}
