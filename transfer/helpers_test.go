package transfer

import (
	"bytes"
	"errors"
	"testing"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// pattern returns size bytes that differ with seed and position, so a
// misplaced frame shows.
func pattern(seed, size int) []byte {
	p := make([]byte, size)
	x := uint32(seed)*2654435761 + 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] = byte(x)
	}
	return p
}

// collect splits data into frames and returns them.
func collect(t *testing.T, index uint32, data []byte, maxBytes int) []*kvringv1.DataFrame {
	t.Helper()
	var frames []*kvringv1.DataFrame
	if err := SplitFrames(index, data, maxBytes, func(f *kvringv1.DataFrame) error {
		frames = append(frames, f)
		return nil
	}); err != nil {
		t.Fatalf("SplitFrames: %v", err)
	}
	return frames
}

// refs returns ChunkRefs for the chunks' bytes.
func refs(chunks [][]byte) []*kvringv1.ChunkRef {
	out := make([]*kvringv1.ChunkRef, len(chunks))
	for i, c := range chunks {
		out[i] = &kvringv1.ChunkRef{Id: make([]byte, 32), Size: uint64(len(c))}
	}
	return out
}

// set returns the set of indexes.
func set(idx ...uint32) map[uint32]bool {
	m := make(map[uint32]bool, len(idx))
	for _, i := range idx {
		m[i] = true
	}
	return m
}

// bufSink is a Sink that keeps what it is given.
type bufSink struct{ bytes.Buffer }

// failSink fails its write number failAt (0-based); short makes it report a
// short write instead of an error.
type failSink struct {
	writes, failAt int
	short          bool
	got            int
}

var errSink = errors.New("sink: disk on fire")

func (s *failSink) Write(p []byte) (int, error) {
	defer func() { s.writes++ }()
	if s.writes == s.failAt {
		if s.short {
			return len(p) - 1, nil
		}
		return 0, errSink
	}
	s.got += len(p)
	return len(p), nil
}
