package coord

import (
	"context"
	"fmt"
	"time"

	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// The hand-off's transport: ask a member what it holds, and copy chunks
// this node holds to it with the same two-phase write an engine's put runs
// (prepare, data, votes, commit), so a copied chunk counts as held there
// only once it is sealed. What to copy, where and when is the hand-off's
// decision (node/internal/handoff), not the coordinator's.

// CopyChunk is one chunk to copy: its bytes, read from this node's store,
// and its placement key. The caller owns the View and releases it after
// Copy returns.
type CopyChunk struct {
	View  *store.View
	ID    store.ID
	Place store.ID // its group's key (used when the namespace places by groups)
}

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
// (another writer is storing it there), or another error. Blocks on the exchange with m, each step bounded by
// PeerTimeout, the commit by CommitTimeout.
func (c *Coordinator) Copy(ctx context.Context, m ring.Member, rec *kvringv1.NamespaceRecord, chunks []CopyChunk) []error {
	return c.copyTo(ctx, m, rec, chunks, spreadMark{})
}

// SpreadCopy is Copy of chunks of hot groups that this node, their primary
// owner, spreads to width members: m keeps them as spread copies for ttl
// (PrepareBegin.spread_width). The namespace must place chunks by groups.
func (c *Coordinator) SpreadCopy(ctx context.Context, m ring.Member, rec *kvringv1.NamespaceRecord, chunks []CopyChunk, width int, ttl time.Duration) []error {
	return c.copyTo(ctx, m, rec, chunks, spreadMark{width: uint32(width), ttlMs: uint32(ttl / time.Millisecond)})
}

// spreadMark is what a prepare says of spread copies (zero: an ordinary
// write).
type spreadMark struct{ width, ttlMs uint32 }

// copyTo is Copy, the prepare marked with spread.
func (c *Coordinator) copyTo(ctx context.Context, m ring.Member, rec *kvringv1.NamespaceRecord, chunks []CopyChunk, spread spreadMark) []error {
	errs := make([]error, len(chunks))
	for i := range errs {
		errs[i] = fmt.Errorf("node %s did not answer for the chunk", m.ID)
	}
	refs := make([]*kvringv1.ChunkRef, len(chunks))
	keys := make([][]byte, len(chunks))
	for i, ch := range chunks {
		refs[i] = &kvringv1.ChunkRef{Id: ch.ID[:], Size: uint64(len(ch.View.Bytes())), Crc32C: ch.View.Checksum(),
			Name: nameBytes(ch.View.Name())}
		keys[i] = ch.Place[:]
	}
	var runs []*kvringv1.GroupRun
	if namespace.GroupSize(rec.GetSchema()) > 1 {
		runs = transfer.GroupRuns(keys)
	}
	fail := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	ref := nsRef(rec)
	var sess putSession
	defer func() {
		if sess != nil {
			sess.close()
		}
	}()
	var need []uint32
	var votes []*kvringv1.ChunkVote
	err := c.taught(ctx, m, rec.GetName(), func() (err error) {
		if sess != nil {
			sess.close()
		}
		if sess, err = c.session(m); err != nil {
			return err
		}
		if rs, ok := sess.(*remoteSession); ok {
			rs.spread = spread
		}
		need, votes, err = sess.begin(ctx, ref, refs, runs)
		return err
	})
	c.peers.note(ctx, m, err)
	if err != nil {
		return fail(fmt.Errorf("node %s (%s): %w", m.ID, m.Addr, transfer.FromStatus(err)))
	}
	for _, v := range votes {
		if i := int(v.GetIndex()); i < len(errs) {
			errs[i] = voteErr(v)
		}
	}
	if len(need) == 0 {
		return errs
	}
	for _, i := range need {
		if int(i) >= len(chunks) {
			return fail(fmt.Errorf("node %s asked for chunk %d of %d", m.ID, i, len(chunks)))
		}
		if err := sendChunk(sess, i, chunks[i].View.Bytes()); err != nil {
			return fail(fmt.Errorf("node %s (%s): %w", m.ID, m.Addr, transfer.FromStatus(err)))
		}
	}
	final, err := sess.finish()
	if err != nil {
		return fail(fmt.Errorf("node %s (%s): %w", m.ID, m.Addr, transfer.FromStatus(err)))
	}
	var staged []*kvringv1.StagedChunk
	var order []int
	for _, v := range final {
		i := int(v.GetIndex())
		if i >= len(chunks) {
			continue
		}
		if v.GetVote() != kvringv1.Vote_VOTE_READY {
			errs[i] = voteErr(v)
			continue
		}
		staged = append(staged, &kvringv1.StagedChunk{StageToken: v.GetStageToken(), Id: chunks[i].ID[:]})
		order = append(order, i)
	}
	if len(staged) == 0 {
		return errs
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
	defer cancel()
	res, err := sess.commit(cctx, ref, staged)
	if err != nil {
		for _, i := range order {
			errs[i] = fmt.Errorf("commit on node %s: %w", m.ID, err)
		}
		return errs
	}
	for k, r := range res {
		i := order[k]
		switch {
		case r.GetStatus() == kvringv1.CommitStatus_COMMIT_STATUS_SEALED:
			errs[i] = nil
		case transfer.CodeIs(r.GetCode(), store.ErrRejected):
			errs[i] = fmt.Errorf("%w: %s", store.ErrRejected, r.GetReason())
		default:
			errs[i] = fmt.Errorf("commit on node %s: %s", m.ID, r.GetReason())
		}
	}
	return errs
}

// sendChunk sends one chunk's bytes as frames of at most MaxFrameBytes.
func sendChunk(sess putSession, index uint32, b []byte) error {
	for off := 0; off < len(b); off += transfer.MaxFrameBytes {
		end := min(len(b), off+transfer.MaxFrameBytes)
		if err := sess.send(transfer.Frame{Index: index, Offset: uint64(off), Data: [][]byte{b[off:end]}}); err != nil {
			return err
		}
	}
	return nil
}

// voteErr is a prepare vote as Copy reports it: store.ErrAlreadyHeld for a
// chunk the owner holds already, store.ErrRejected or store.ErrBusy wrapped with the
// owner's reason, or an error with the reason.
func voteErr(v *kvringv1.ChunkVote) error {
	switch {
	case v.GetVote() == kvringv1.Vote_VOTE_ALREADY_HELD:
		return store.ErrAlreadyHeld
	case v.GetVote() == kvringv1.Vote_VOTE_REJECTED:
		return fmt.Errorf("%w: %s", store.ErrRejected, v.GetReason())
	case isBusy(v):
		return fmt.Errorf("%w: %s", store.ErrBusy, v.GetReason())
	default:
		return fmt.Errorf("%s", v.GetReason())
	}
}

// nameBytes is a chunk's name as ChunkRef.name carries it (nil for none).
func nameBytes(name string) []byte {
	if name == "" {
		return nil
	}
	return []byte(name)
}
