package clustertest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/kvring/kvring/internal/crc32c"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// Chunk is a chunk an engine writes: its id and bytes.
type Chunk struct {
	ID   []byte
	Data []byte
}

// ChunkOf returns chunk n of size bytes: its id and bytes follow from n
// alone, so two tests (or two calls) never mistake one chunk for another.
func ChunkOf(n uint64, size int) Chunk {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	id := sha256.Sum256(b[:])
	data := make([]byte, size)
	for off := 0; off < size; off += 32 {
		h := sha256.Sum256(append(id[:], byte(off>>16), byte(off>>8), byte(off)))
		copy(data[off:], h[:])
	}
	return Chunk{ID: id[:], Data: data}
}

// Ref is the chunk's descriptor.
func (c Chunk) Ref() *kvringv1.ChunkRef {
	return &kvringv1.ChunkRef{Id: c.ID, Size: uint64(len(c.Data)), Crc32C: crc32c.Checksum(c.Data)}
}

// IDs are the ids of chunks.
func IDs(chunks []Chunk) [][]byte {
	ids := make([][]byte, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	return ids
}

// PutOptions are the less common parts of a Put.
type PutOptions struct {
	// Eager sends every chunk's bytes without waiting for the need message.
	Eager bool
	// Groups are the chunks' placement runs (a grouped namespace).
	Groups []*kvringv1.GroupRun
	// BeforeEnd, if set, runs after the data and before the end message
	// (an engine that goes away at that point cancels its call there).
	BeforeEnd func()
}

// Put writes chunks through cache as an engine does: begin, the bytes of
// what is needed (or of everything, eager), end; it returns the result of
// every chunk, in order.
func Put(ctx context.Context, cache kvringv1.CacheClient, ref *kvringv1.NamespaceRef, chunks []Chunk, opts PutOptions) ([]*kvringv1.PutChunkResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := cache.Put(ctx)
	if err != nil {
		return nil, err
	}
	refs := make([]*kvringv1.ChunkRef, len(chunks))
	for i, c := range chunks {
		refs[i] = c.Ref()
	}
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Begin{Begin: &kvringv1.PutBegin{
		Namespace: ref, Chunks: refs, Groups: opts.Groups, Eager: opts.Eager}}}); err != nil {
		return nil, sendErr(stream, err)
	}
	need, settled, err := putNeed(stream, chunks, opts.Eager)
	if err != nil {
		return nil, err
	}
	for _, i := range need {
		if err := sendChunk(stream, i, chunks[i].Data); err != nil {
			return nil, sendErr(stream, err)
		}
	}
	if opts.BeforeEnd != nil {
		opts.BeforeEnd()
	}
	if err := stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_End{End: &kvringv1.PutEnd{}}}); err != nil {
		return nil, sendErr(stream, err)
	}
	m, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	res := m.GetResult().GetResults()
	if !opts.Eager {
		res = append(settled, res...)
	}
	out := make([]*kvringv1.PutChunkResult, len(chunks))
	for _, r := range res {
		if int(r.GetIndex()) < len(out) {
			out[r.GetIndex()] = r
		}
	}
	for i, r := range out {
		if r == nil {
			return nil, fmt.Errorf("no result for chunk %d", i)
		}
	}
	return out, nil
}

// putNeed reads the need message (all chunks, eager).
func putNeed(stream kvringv1.Cache_PutClient, chunks []Chunk, eager bool) ([]uint32, []*kvringv1.PutChunkResult, error) {
	if eager {
		need := make([]uint32, len(chunks))
		for i := range need {
			need[i] = uint32(i)
		}
		return need, nil, nil
	}
	m, err := stream.Recv()
	if err != nil {
		return nil, nil, err
	}
	if m.GetNeed() == nil {
		return nil, nil, errors.New("the node answered begin without a need message")
	}
	return m.GetNeed().GetNeed(), m.GetNeed().GetSettled(), nil
}

// sendChunk sends one chunk's bytes in frames.
func sendChunk(stream kvringv1.Cache_PutClient, i uint32, b []byte) error {
	return transfer.SplitFrames(i, b, transfer.MaxFrameBytes, func(f *kvringv1.DataFrame) error {
		return stream.Send(&kvringv1.PutRequest{Msg: &kvringv1.PutRequest_Data{Data: f}})
	})
}

// sendErr replaces io.EOF from Send with the stream's real status.
func sendErr(stream kvringv1.Cache_PutClient, err error) error {
	if errors.Is(err, io.EOF) {
		if _, rerr := stream.Recv(); rerr != nil {
			return rerr
		}
	}
	return err
}

// Got is what a Get answered for one chunk.
type Got struct {
	Header *kvringv1.ChunkHeader
	Data   []byte
}

// Get reads ids through cache and returns, per id in order, its header and
// (when found) its bytes.
func Get(ctx context.Context, cache kvringv1.CacheClient, ref *kvringv1.NamespaceRef, ids [][]byte, groups []*kvringv1.GroupRun) ([]Got, error) {
	stream, err := cache.Get(ctx, &kvringv1.GetRequest{Namespace: ref, Ids: ids, Groups: groups})
	if err != nil {
		return nil, err
	}
	out := make([]Got, len(ids))
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if h := m.GetHeader(); h != nil {
			if int(h.GetIndex()) >= len(out) {
				return nil, fmt.Errorf("a header for chunk %d of %d", h.GetIndex(), len(ids))
			}
			out[h.GetIndex()].Header = h
			continue
		}
		d := m.GetData()
		if int(d.GetIndex()) >= len(out) {
			return nil, fmt.Errorf("data for chunk %d of %d", d.GetIndex(), len(ids))
		}
		out[d.GetIndex()].Data = append(out[d.GetIndex()].Data, d.GetData()...)
	}
}
