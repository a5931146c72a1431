package owner

import (
	"errors"

	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// Prepare is an owner's side of the prepare phase for one batch: stage each
// chunk, take its bytes, vote. The Peer service's Prepare stream and a
// coordinator's in-process session both drive it. Not safe for concurrent
// use: it belongs to the goroutine that receives the batch's frames.
type Prepare struct {
	st   Store
	ns   string // store namespace
	ids  []store.ID
	keys [][]byte // placement group key per index (nil: placed by ids)
	// name, replicas and place are what Config.Placed is told: the
	// namespace's name and replication, and the staged chunks' ring keys.
	name     string
	replicas int
	place    [][]byte
	placeIDs []store.ID
	staged   map[uint32]*store.Staged
	asm      *transfer.Assembler
	done     bool
	// caller is who may commit or abort the chunks this prepare stages
	// (see Owner.Commit): the remote address of the Peer connection, or ""
	// for this node's own coordinator in process.
	caller string
	// client is charged the staged slots (see NewPrepareFrom).
	client string
}

// NewPrepare starts the prepare phase of a batch: every chunk is staged. It
// returns the indexes whose bytes are needed and the votes of the others
// (already held, rejected, failed). runs are the chunks' placement keys when
// the namespace places chunks by groups: each chunk keeps its key, for the
// hand-off (without them such chunks are stored but never handed off). Bad
// input is ErrInvalidArgument naming the field. Blocks briefly on the store's
// admission policy.
func (o *Owner) NewPrepare(ref *kvringv1.NamespaceRef, chunks []*kvringv1.ChunkRef, runs []*kvringv1.GroupRun) (*Prepare, []uint32, []*kvringv1.ChunkVote, error) {
	return o.newPrepare("", ref, chunks, runs, nil)
}

// newPrepare is NewPrepare; slot, when not nil, may give a chunk its slot
// complete (see NewPrepareFrom).
func (o *Owner) newPrepare(client string, ref *kvringv1.NamespaceRef, chunks []*kvringv1.ChunkRef, runs []*kvringv1.GroupRun, slot SlotFunc) (*Prepare, []uint32, []*kvringv1.ChunkVote, error) {
	// Chunks are written only into namespaces this node knows, under the
	// registered fingerprint (a coordinator that finds the namespace unknown
	// here offers its record and asks again).
	_, rec, err := o.cfg.Registry.Resolve(ref)
	if err != nil {
		return nil, nil, nil, err
	}
	ids, err := ValidateChunks(chunks, o.maxChunk, o.cfg.MaxBatch)
	if err != nil {
		return nil, nil, nil, err
	}
	raw := make([][]byte, len(chunks))
	for i, c := range chunks {
		raw[i] = c.GetId()
	}
	groups, err := namespace.ResolveGroups(rec, raw, runs, true)
	if err != nil {
		return nil, nil, nil, err
	}
	p := &Prepare{st: o.st, ns: namespace.StoreName(ref.GetName(), ref.GetFingerprint()), ids: ids,
		staged: make(map[uint32]*store.Staged), client: client}
	if groups.Grouped {
		p.keys = groups.Keys
	}
	need, votes := p.stage(chunks, slot)
	p.name, p.replicas = rec.GetName(), int(max(1, rec.GetReplicationFactor()))
	for _, i := range need {
		p.place = append(p.place, groups.Keys[i])
		p.placeIDs = append(p.placeIDs, ids[i])
	}
	return p, need, votes, nil
}

// stage reserves a slot for every chunk (slot's, when it gives one) and
// routes the frames of those whose bytes must arrive to their slots.
func (p *Prepare) stage(chunks []*kvringv1.ChunkRef, slot SlotFunc) (need []uint32, votes []*kvringv1.ChunkVote) {
	needed := make(map[uint32]bool)
	for i, c := range chunks {
		idx := uint32(i)
		w, err := p.slotOf(i, c, slot)
		if err != nil {
			votes = append(votes, p.voteFor(idx, err))
			continue
		}
		if p.keys != nil {
			w.SetPlacement(store.ID(p.keys[i]))
		}
		if len(c.GetName()) > 0 {
			w.SetName(string(c.GetName()))
		}
		p.staged[idx] = w
		if !w.Complete() {
			needed[idx] = true
		}
		need = append(need, idx)
	}
	p.asm = transfer.NewAssembler(chunks, needed)
	for idx, w := range p.staged {
		if needed[idx] {
			_ = p.asm.SetSink(idx, w) // idx is needed: SetSink cannot fail
		}
	}
	return need, votes
}

// notePlaced tells Config.Placed where the chunks p staged are placed.
// Spread copies are not told: their holders keep them as such.
func (o *Owner) notePlaced(p *Prepare) {
	if o.cfg.Placed != nil && len(p.place) > 0 {
		o.cfg.Placed(p.name, p.ns, p.replicas, p.place, p.placeIDs)
	}
}

// Frame takes one data frame; its bytes are copied into the chunk's slot and
// not kept. An error is bad input from the sender (ErrBadFrame: the caller
// aborts the batch and answers InvalidArgument). A slot that refuses the
// bytes (its lease ran out) fails only its chunk, which is voted failed.
func (p *Prepare) Frame(f transfer.Frame) error {
	_, err := p.asm.AddFrame(f)
	if err != nil && !errors.Is(err, transfer.ErrBadFrame) {
		return nil
	}
	return err
}

// Abort frees every staged slot (the stream broke or carried bad input).
func (p *Prepare) Abort() {
	for _, w := range p.staged {
		w.Abort()
	}
	p.staged = nil
	p.done = true
}

// Done reports whether the batch was voted on or aborted.
func (p *Prepare) Done() bool { return p.done }

// EndPrepare votes on the needed chunks of p, registering the READY ones
// under stage tokens until Commit or Abort.
func (o *Owner) EndPrepare(p *Prepare) []*kvringv1.ChunkVote {
	votes := make([]*kvringv1.ChunkVote, 0, len(p.staged))
	for idx, w := range p.staged {
		err := p.asm.Err(idx) // the slot refused bytes (no space, a fault, its lease): that is the chunk's fate
		if err == nil {
			err = w.Check()
		}
		if err != nil {
			w.Abort()
			votes = append(votes, p.voteFor(idx, err))
			continue
		}
		tok := o.register(p.ns, p.ids[idx], w, p.caller)
		votes = append(votes, &kvringv1.ChunkVote{Index: idx, Vote: kvringv1.Vote_VOTE_READY, StageToken: tok})
	}
	p.staged = nil
	p.done = true
	return votes
}

// voteFor is voteFor's vote on chunk idx of p; an ALREADY_HELD vote carries
// the checksum of the bytes held (so a writer of other bytes learns it).
func (p *Prepare) voteFor(idx uint32, err error) *kvringv1.ChunkVote {
	v := voteFor(idx, err)
	if v.Vote == kvringv1.Vote_VOTE_ALREADY_HELD && int(idx) < len(p.ids) {
		v.HeldCrc32C, _ = p.st.HeldChecksum(p.ns, p.ids[idx])
	}
	return v
}

// voteFor turns a store error into a vote carrying the error's wire code.
func voteFor(idx uint32, err error) *kvringv1.ChunkVote {
	v := &kvringv1.ChunkVote{Index: idx, Reason: err.Error(), Code: transfer.WireCode(err)}
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
