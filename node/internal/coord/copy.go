package coord

import (
	"context"
	"fmt"
	"time"

	"github.com/kvring/kvring/node/internal/chunkcopy"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// The hand-off's transport: ask a member what it holds, and copy chunks
// this node holds to it with the same two-phase write an engine's put runs
// (a writeTx: prepare, data, votes, commit), so a copied chunk counts as
// held there only once it is sealed. What to copy, where and when is the
// hand-off's decision (node/internal/handoff) or the spreader's
// (node/internal/spread), not the coordinator's.

// Has asks member m which of ids of namespace rec it holds sealed now,
// pinning them there under pin (nil: no pin; the pins keep m from evicting
// them until Unpin or the granted time, which it returns, runs out). Blocks
// for at most PeerTimeout. Without a pin the request may share a call with
// concurrent ones to m (hasCoalescer).
func (c *Coordinator) Has(ctx context.Context, m ring.Member, rec *kvringv1.NamespaceRecord, ids [][]byte, pin *kvringv1.LeasePin) ([]bool, time.Duration, error) {
	pc, err := c.peer(m)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := c.peerCtx(ctx)
	defer cancel()
	req := &kvringv1.HasRequest{Caller: c.caller(), Namespace: nsRef(rec), Ids: ids, Pin: pin}
	var resp *kvringv1.HasResponse
	err = c.taught(ctx, m, rec.GetName(), func() (err error) {
		resp, err = c.has.has(ctx, m.Addr, pc.Has, req)
		return err
	})
	c.peers.note(ctx, m, err)
	if err != nil {
		return nil, 0, fmt.Errorf("node %s (%s): %w", m.ID, m.Addr, transfer.FromStatus(err))
	}
	if len(resp.GetHeld()) != len(ids) {
		return nil, 0, fmt.Errorf("node %s answered %d of %d ids", m.ID, len(resp.GetHeld()), len(ids))
	}
	return resp.GetHeld(), time.Duration(resp.GetLeaseTtlMs()) * time.Millisecond, nil
}

// Unpin releases the pins Has took on member m under leases. Best effort:
// pins also end with their time. Blocks for at most PeerTimeout.
func (c *Coordinator) Unpin(ctx context.Context, m ring.Member, leases []uint64) {
	pc, err := c.peer(m)
	if err != nil {
		return
	}
	ctx, cancel := c.peerCtx(ctx)
	defer cancel()
	_, err = pc.Unpin(ctx, &kvringv1.UnpinRequest{Caller: c.caller(), LeaseIds: leases})
	c.peers.note(ctx, m, err)
}

// Copy writes chunks (at most MaxBatch, of namespace rec) to member m, a
// peer, and returns per chunk nil when this copy was sealed there, or why
// not: store.ErrAlreadyHeld (m had it: ask Has to confirm it with a pin),
// store.ErrRejected (m's policy or budget declined it), store.ErrBusy
// (another writer is storing it there), or another error. A non-zero
// spread marks the chunks as copies of hot groups that this node, their
// primary owner, spreads to spread.Width members, kept there for
// spread.TTL (PrepareBegin.spread_width; the namespace must place chunks
// by groups). It is a chunkcopy.Func. Blocks on the exchange with m, each
// step bounded by PeerTimeout, the commit by CommitTimeout.
func (c *Coordinator) Copy(ctx context.Context, m ring.Member, rec *kvringv1.NamespaceRecord, chunks []chunkcopy.Chunk, spread chunkcopy.Spread) []error {
	tx := c.newCopy(m, rec, chunks, spread)
	if _, err := tx.run(ctx); err != nil {
		return repeatErr(len(chunks), err) // storeData.deliver never fails
	}
	return tx.copyErrs()
}

// newCopy is the write of a Copy: every chunk goes to m alone.
func (c *Coordinator) newCopy(m ring.Member, rec *kvringv1.NamespaceRecord, chunks []chunkcopy.Chunk, spread chunkcopy.Spread) *writeTx {
	refs := make([]*kvringv1.ChunkRef, len(chunks))
	keys := make([][]byte, len(chunks))
	for i, ch := range chunks {
		refs[i] = &kvringv1.ChunkRef{Id: ch.ID[:], Size: uint64(len(ch.View.Bytes())), Crc32C: ch.View.Checksum(),
			Name: nameBytes(ch.View.Name())}
		keys[i] = ch.Place[:]
	}
	tx := &writeTx{c: c, ref: nsRef(rec), chunks: refs, keys: keys, grouped: namespace.GroupSize(rec.GetSchema()) > 1,
		data: storeData{chunks: chunks}, shares: map[string]*ownerShare{}, owners: make([][]*ownerShare, len(chunks)),
		spread: spreadMark{width: uint32(max(spread.Width, 0)), ttlMs: uint32(spread.TTL / time.Millisecond)}}
	tx.replicas, tx.minReplicas = 1, 1
	for i, ch := range refs {
		tx.addTo(m.ID, m, uint32(i), ch)
	}
	return tx
}

// storeData is the data phase of a copy: the bytes are read from the views
// of this node's store the caller lent.
type storeData struct{ chunks []chunkcopy.Chunk }

func (storeData) slot(*writeTx, *ownerShare) owner.SlotFunc { return nil }

func (d storeData) deliver(_ context.Context, tx *writeTx, _ []*kvringv1.PutChunkResult) error {
	for _, idx := range tx.need {
		tx.sinks[idx].writeChunk(d.chunks[idx].View.Bytes())
	}
	return nil
}

// copyErrs is the outcome of a copy per chunk, from its one share: nil
// when it was sealed, else why not (voteErr).
func (tx *writeTx) copyErrs() []error {
	errs := make([]error, len(tx.chunks))
	for i := range errs {
		s := tx.owners[i][0]
		si := s.toShare[uint32(i)]
		v := s.votes[si]
		switch {
		case s.failed != nil:
			errs[i] = s.failed
		case s.sealed[si]:
			errs[i] = nil
		case v == nil:
			errs[i] = fmt.Errorf("node %s did not answer for the chunk", s.member.ID)
		case v.GetVote() == kvringv1.Vote_VOTE_READY:
			errs[i] = fmt.Errorf("node %s voted ready but was not committed", s.member.ID)
		default:
			errs[i] = voteErr(s.member, v)
		}
	}
	return errs
}

// repeatErr is err for each of n chunks.
func repeatErr(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// voteErr is an owner's vote as Copy reports it: store.ErrAlreadyHeld for
// a chunk the owner holds already, store.ErrRejected or store.ErrBusy
// wrapped with the owner's reason, or an error with the reason.
func voteErr(m ring.Member, v *kvringv1.ChunkVote) error {
	switch {
	case v.GetVote() == kvringv1.Vote_VOTE_ALREADY_HELD:
		return store.ErrAlreadyHeld
	case v.GetVote() == kvringv1.Vote_VOTE_REJECTED:
		return fmt.Errorf("%w: node %s: %s", store.ErrRejected, m.ID, v.GetReason())
	case isBusy(v):
		return fmt.Errorf("%w: node %s: %s", store.ErrBusy, m.ID, v.GetReason())
	default:
		return fmt.Errorf("node %s: %s", m.ID, v.GetReason())
	}
}

// nameBytes is a chunk's name as ChunkRef.name carries it (nil for none).
func nameBytes(name string) []byte {
	if name == "" {
		return nil
	}
	return []byte(name)
}
