package node

import (
	"errors"
	"fmt"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// prepareState is an owner's side of the prepare phase for one batch: stage
// each chunk, take its bytes, vote. The Peer service's Prepare stream and the
// coordinator's in-process owner (when the coordinator owns chunks itself)
// both drive it. Not safe for concurrent use.
type prepareState struct {
	st     *store.Store
	ns     string // store namespace
	chunks []*kvringv1.ChunkRef
	ids    []store.ID
	staged map[uint32]*store.Staged
	asm    *transfer.Assembler
	done   bool
}

// validateChunks checks a batch's descriptors: ids of 32 bytes, sizes within
// (0, maxChunk], at most maxBatch chunks. The error names the chunk index and
// the field.
func validateChunks(chunks []*kvringv1.ChunkRef, maxChunk int64, maxBatch int) ([]store.ID, error) {
	if len(chunks) == 0 {
		return nil, fmt.Errorf("%w: the batch has no chunks", transfer.ErrInvalidArgument)
	}
	if len(chunks) > maxBatch {
		return nil, fmt.Errorf("%w: %d chunks in one call, more than the limit %d", transfer.ErrInvalidArgument, len(chunks), maxBatch)
	}
	ids := make([]store.ID, len(chunks))
	first := make(map[store.ID]int, len(chunks))
	for i, c := range chunks {
		id, err := store.ParseID(c.GetId())
		if err != nil {
			return nil, fmt.Errorf("%w: chunks[%d].id: must be %d bytes, got %d", transfer.ErrInvalidArgument, i, store.IDSize, len(c.GetId()))
		}
		if c.GetSize() == 0 || int64(c.GetSize()) > maxChunk {
			return nil, fmt.Errorf("%w: chunks[%d].size: %d bytes is outside (0, %d]", transfer.ErrInvalidArgument, i, c.GetSize(), maxChunk)
		}
		if j, dup := first[id]; dup {
			return nil, fmt.Errorf("%w: chunks[%d].id is the same as chunks[%d].id: a batch names each chunk once", transfer.ErrInvalidArgument, i, j)
		}
		first[id] = i
		ids[i] = id
	}
	return ids, nil
}

// begin stages every chunk. It returns the indexes whose bytes are needed and
// the votes of the others (already held, rejected, failed).
func (p *prepareState) begin(ns string, chunks []*kvringv1.ChunkRef, ids []store.ID) (need []uint32, votes []*kvringv1.ChunkVote) {
	p.ns, p.chunks, p.ids = ns, chunks, ids
	p.staged = make(map[uint32]*store.Staged)
	needed := make(map[uint32]bool)
	for i, c := range chunks {
		idx := uint32(i)
		w, err := p.st.Stage(ns, ids[i], int64(c.GetSize()), c.GetCrc32C())
		if err != nil {
			votes = append(votes, voteFor(idx, err))
			continue
		}
		p.staged[idx] = w
		needed[idx] = true
		need = append(need, idx)
	}
	p.asm = transfer.NewAssembler(chunks, needed)
	for idx, w := range p.staged {
		p.asm.SetSink(idx, w)
	}
	return need, votes
}

// frame takes one data frame. An error is bad input from the sender (the
// caller aborts the batch and answers InvalidArgument) or a write failure.
func (p *prepareState) frame(f transfer.Frame) error {
	_, err := p.asm.AddFrame(f)
	if err != nil && !errors.Is(err, transfer.ErrBadFrame) {
		// The chunk's slot refused the bytes (its lease ran out): the
		// assembler drops that chunk's later frames and it is voted failed.
		return nil
	}
	return err
}

// abort frees every staged slot (the stream broke or carried bad input).
func (p *prepareState) abort() {
	for _, w := range p.staged {
		w.Abort()
	}
	p.staged = nil
	p.done = true
}

// voteFor turns a store error into a vote.
func voteFor(idx uint32, err error) *kvringv1.ChunkVote {
	v := &kvringv1.ChunkVote{Index: idx, Reason: err.Error(), Code: uint32(transfer.Code(err))}
	switch {
	case errors.Is(err, store.ErrAlreadyHeld):
		v.Vote, v.Reason, v.Code = kvringv1.Vote_VOTE_ALREADY_HELD, "", 0
	case errors.Is(err, store.ErrRejected), errors.Is(err, store.ErrNoSpace):
		v.Vote = kvringv1.Vote_VOTE_REJECTED
	default:
		v.Vote = kvringv1.Vote_VOTE_FAILED
	}
	return v
}
