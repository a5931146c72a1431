package transfer

import (
	"fmt"
	"io"
	"strings"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// Sink receives one chunk's bytes, in order, as they arrive. A *store.Staged
// satisfies it; a coordinator writing a chunk to several owners registers a
// sink that forwards to each of them. Write must not keep p after it
// returns: p is the received message's buffer. A short write without an
// error counts as io.ErrShortWrite.
//
// A Sink that also has WriteBuffers (a BuffersSink) gets a frame's pieces in
// one call instead of one Write per piece.
type Sink interface {
	Write(p []byte) (int, error)
}

// BuffersSink is a Sink that takes the pieces of a frame in one call, in
// order, returning how many bytes it took; like Write, it must not keep them.
type BuffersSink interface {
	Sink
	WriteBuffers(bufs [][]byte) (int, error)
}

// Assembler reassembles the frames of one batch of chunks (the chunks of one
// Put, Prepare, Get or Fetch stream), checks them against the framing rules
// and routes their bytes to the Sink registered for each needed chunk.
//
// An Assembler belongs to the goroutine that receives the stream; it is not
// safe for concurrent use. It never blocks except in its Sinks.
type Assembler struct {
	chunks []chunkState
}

type chunkState struct {
	size     uint64
	received uint64
	needed   bool
	sink     Sink
	err      error // the sink's error; later frames are discarded
}

// NewAssembler returns an Assembler for the batch chunks, of which the
// chunks whose indexes are true in need will be received. Frames for the
// other chunks are discarded unread, and so are indexes in need that are out
// of range or name a nil ChunkRef. The chunk sizes are taken as they are:
// checking them against the node's limits is the caller's job, before it
// decides what it needs. A needed chunk of size 0 is complete from the
// start. need is not kept.
func NewAssembler(chunks []*kvringv1.ChunkRef, need map[uint32]bool) *Assembler {
	a := &Assembler{chunks: make([]chunkState, len(chunks))}
	for idx, ok := range need {
		if !ok || int64(idx) >= int64(len(chunks)) || chunks[idx] == nil {
			continue
		}
		a.chunks[idx] = chunkState{needed: true, size: chunks[idx].GetSize()}
	}
	return a
}

// SetSink registers the sink that receives the bytes of needed chunk index.
// It must be set before the chunk's first frame arrives; setting it again
// replaces it. An index that is out of range or not needed is
// ErrInvalidArgument.
func (a *Assembler) SetSink(index uint32, s Sink) error {
	if int64(index) >= int64(len(a.chunks)) || !a.chunks[index].needed {
		return fmt.Errorf("%w: cannot set a sink for chunk %d: not a needed chunk of this batch", ErrInvalidArgument, index)
	}
	a.chunks[index].sink = s
	return nil
}

// Add checks f and writes its bytes to its chunk's sink, which it returns.
//
//   - A frame for a chunk that is not needed, or whose sink already failed,
//     is discarded unread: nil, nil.
//   - A frame that breaks the framing rules is an error wrapping ErrBadFrame
//     naming the field: data.index (out of range), data.offset (not equal to
//     the bytes received so far for the chunk), data.data (empty, larger than
//     MaxFrameBytes, or past the chunk's size). Nothing is written; the
//     stream must fail with InvalidArgument.
//   - A sink's error is returned wrapped, with the sink; the chunk is then
//     failed (Err reports it), and its later frames are discarded. The rest
//     of the batch carries on.
//   - A needed chunk without a sink is a caller error (not ErrBadFrame).
//
// f.Data is passed to the sink and not kept.
func (a *Assembler) Add(f *kvringv1.DataFrame) (Sink, error) {
	if f == nil {
		return nil, fmt.Errorf("%w: data: missing frame", ErrBadFrame)
	}
	return a.AddFrame(Frame{Index: f.Index, Offset: f.Offset, Data: [][]byte{f.Data}})
}

// AddFrame is Add for a frame whose bytes are in pieces (as InFrame receives
// them): the pieces go to the sink in one WriteBuffers call when it has one,
// otherwise one Write each.
func (a *Assembler) AddFrame(f Frame) (Sink, error) {
	if int64(f.Index) >= int64(len(a.chunks)) {
		return nil, fmt.Errorf("%w: data.index: %d out of range, the batch has %d chunks", ErrBadFrame, f.Index, len(a.chunks))
	}
	c := &a.chunks[f.Index]
	if !c.needed || c.err != nil {
		return nil, nil
	}
	n := uint64(f.Len())
	switch {
	case n == 0:
		return nil, fmt.Errorf("%w: data.data: empty frame for chunk %d at offset %d", ErrBadFrame, f.Index, f.Offset)
	case n > MaxFrameBytes:
		return nil, fmt.Errorf("%w: data.data: %d bytes for chunk %d, more than the maximum %d", ErrBadFrame, n, f.Index, MaxFrameBytes)
	case f.Offset != c.received:
		return nil, fmt.Errorf("%w: data.offset: %d for chunk %d, expected %d (frames must run in order without gaps or overlaps)", ErrBadFrame, f.Offset, f.Index, c.received)
	case n > c.size-c.received:
		return nil, fmt.Errorf("%w: data.data: %d bytes at offset %d run past the size %d of chunk %d", ErrBadFrame, n, f.Offset, c.size, f.Index)
	}
	if c.sink == nil {
		return nil, fmt.Errorf("cannot write frame of chunk %d: no sink set", f.Index)
	}
	w, err := writeFrame(c.sink, f.Data)
	if err == nil && uint64(w) != n {
		err = io.ErrShortWrite
	}
	if err != nil {
		c.err = fmt.Errorf("cannot write %d bytes at offset %d of chunk %d: %w", n, f.Offset, f.Index, err)
		return c.sink, c.err
	}
	c.received += n
	return c.sink, nil
}

// Complete reports whether every byte of needed chunk index has been
// written to its sink.
func (a *Assembler) Complete(index uint32) bool {
	if int64(index) >= int64(len(a.chunks)) {
		return false
	}
	c := &a.chunks[index]
	return c.needed && c.err == nil && c.received == c.size
}

// Err returns the error that failed needed chunk index (its sink's, wrapped),
// or nil.
func (a *Assembler) Err(index uint32) error {
	if int64(index) >= int64(len(a.chunks)) {
		return nil
	}
	return a.chunks[index].err
}

// Missing returns the needed chunks whose bytes are not all received, in
// index order, leaving out those that failed (see Err). After the stream
// ended, each of them is short.
func (a *Assembler) Missing() []uint32 {
	var out []uint32
	for i := range a.chunks {
		if c := &a.chunks[i]; c.needed && c.err == nil && c.received < c.size {
			out = append(out, uint32(i))
		}
	}
	return out
}

// maxListed is how many short chunks Finish names before summarizing.
const maxListed = 8

// Finish is called when the stream has ended. It returns nil when every
// needed chunk is complete or failed, and otherwise an error wrapping
// ErrIncompleteStream that names the short chunks and how many of their
// bytes arrived.
func (a *Assembler) Finish() error {
	missing := a.Missing()
	if len(missing) == 0 {
		return nil
	}
	var b strings.Builder
	for i, idx := range missing {
		if i == maxListed {
			fmt.Fprintf(&b, ", and %d more", len(missing)-maxListed)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		c := &a.chunks[idx]
		fmt.Fprintf(&b, "chunk %d has %d of %d bytes", idx, c.received, c.size)
	}
	return fmt.Errorf("%w: %s", ErrIncompleteStream, b.String())
}

// writeFrame writes a frame's pieces to s.
func writeFrame(s Sink, bufs [][]byte) (int, error) {
	if bs, ok := s.(BuffersSink); ok && len(bufs) > 1 {
		return bs.WriteBuffers(bufs)
	}
	total := 0
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		w, err := s.Write(b)
		total += w
		if err != nil {
			return total, err
		}
		if w != len(b) {
			return total, io.ErrShortWrite
		}
	}
	return total, nil
}
