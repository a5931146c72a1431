package coord

import (
	"context"
	"fmt"
	"slices"

	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// The two-phase confirmed write. An engine's Put (put.go), a publish of
// the local socket's blobs (publish.go) and a copy of chunks this node
// holds (copy.go: the hand-off, spreading) are one writeTx each. They
// differ in where their chunks go (placed on the ring, with substitutes
// for unreachable owners; or one member named by the caller), in their
// data phase (a dataPhase: bytes from the engine's stream, from blobs,
// from the store) and in how the outcome is reported (chunk results, or
// one error per chunk); prepare, plan, votes, commit and the decision of
// each chunk's fate are the same code for all three.

// dataPhase is how a write's bytes reach the owners that need them: the
// one phase in which a put, a publish and a copy differ.
type dataPhase interface {
	// slot is the slot function of this node's own prepare for share s
	// (nil: its bytes arrive as frames like a peer's).
	slot(tx *writeTx, s *ownerShare) owner.SlotFunc
	// deliver writes the bytes of every chunk of tx.need to its sink
	// (tx.sinks). settled are the results decided before it (none of
	// its bytes are needed). An error gives the write up: what the owners
	// staged is aborted and the error ends the call.
	deliver(ctx context.Context, tx *writeTx, settled []*kvringv1.PutChunkResult) error
}

// writeTx is one two-phase confirmed write of a batch. Its methods are its
// phases, in the order run runs them: prepare, substitute, plan, the data
// phase, vote, commit, noteOutcomes, and the wait for other writers. Not
// safe for concurrent use (a phase fans out over the owners itself).
type writeTx struct {
	c           *Coordinator
	ref         *kvringv1.NamespaceRef
	chunks      []*kvringv1.ChunkRef // the batch
	keys        [][]byte             // per batch index: its ring key (the id, or its group's key)
	grouped     bool                 // keys are group keys: the owners are sent them
	replicas    int
	minReplicas int
	data        dataPhase
	spread      spreadMark // the chunks are spread copies (a copy of hot groups)
	// onRing: the chunks were placed on ring (place): an owner that cannot
	// be reached is replaced (substitute), and a chunk another writer is
	// staging is waited for (awaitOtherWriters). A copy goes to the one
	// member its caller named, and reports another writer as ErrBusy.
	onRing   bool
	ring     *ring.Ring
	shares   map[string]*ownerShare // by node id
	owners   [][]*ownerShare        // per batch index: the shares of its owners
	need     []uint32               // batch indexes whose bytes are sent
	deferred []uint32               // batch indexes another writer was staging on some owner
	sinks    map[uint32]*fanoutSink
	gate     sinkGate // closed when the write is given up (a put abandoned for idleness)
	// watch cuts the sessions of owners gossip suspects (suspect.go).
	watch suspectWatch
}

// run drives the write's phases and returns the results decided at plan
// (chunks whose bytes nobody needed); the other chunks' fates are in the
// shares (results, copyErrs). An error is the data phase's: the write was
// given up and what the owners staged aborted. Sessions are closed when
// it returns.
func (tx *writeTx) run(ctx context.Context) ([]*kvringv1.PutChunkResult, error) {
	defer tx.closeSessions()
	defer tx.watch.stop()
	tx.prepareShares(ctx, tx.shares)
	if tx.onRing {
		tx.substitute(ctx, tx.ring)
	}
	settled := tx.plan()
	if err := tx.data.deliver(ctx, tx, settled); err != nil {
		tx.gate.close() // a receiver still running forwards nothing more
		tx.abort()
		return nil, err
	}
	tx.vote()
	tx.commit(ctx)
	tx.noteOutcomes(ctx)
	if tx.onRing {
		tx.c.awaitOtherWriters(ctx, tx.ref, tx.shares)
	}
	return settled, nil
}

// place gives every chunk its write owners on the current ring and every
// owner its share.
func (tx *writeTx) place() error {
	rg, err := tx.c.currentRing()
	if err != nil {
		return err
	}
	tx.ring, tx.onRing = rg, true
	tx.owners = make([][]*ownerShare, len(tx.chunks))
	for i, ch := range tx.chunks {
		for _, m := range tx.c.writeOwners(rg, tx.ref.GetName(), tx.keys[i], tx.replicas) {
			tx.addTo(m.ID, m, uint32(i), ch)
		}
	}
	return nil
}

// addTo adds the chunk at batch index i to the share under key (made for
// member m on first use) and returns the share.
func (tx *writeTx) addTo(key string, m ring.Member, i uint32, ch *kvringv1.ChunkRef) *ownerShare {
	s := tx.shares[key]
	if s == nil {
		s = newOwnerShare(m, tx.c.cfg.Self)
		tx.shares[key] = s
	}
	s.add(i, ch)
	tx.owners[i] = append(tx.owners[i], s)
	return s
}

// begin opens a prepare session with s's owner and sends it s's chunks.
func (tx *writeTx) begin(ctx context.Context, s *ownerShare) ([]uint32, []*kvringv1.ChunkVote, error) {
	if s.sess != nil {
		s.sess.close()
	}
	var slot owner.SlotFunc
	if !s.remote {
		slot = tx.data.slot(tx, s)
	}
	sess, err := tx.c.open(s.life, s.member, slot, tx.spread)
	if err != nil {
		return nil, nil, err
	}
	s.sess = sess
	need, votes, err := sess.begin(ctx, tx.ref, s.chunks, tx.runs(s))
	if err != nil {
		return nil, nil, transfer.FromStatus(err)
	}
	return need, votes, nil
}

// runs are the placement keys of s's chunks for its owner (nil when the
// namespace places chunks by their ids).
func (tx *writeTx) runs(s *ownerShare) []*kvringv1.GroupRun {
	if !tx.grouped {
		return nil
	}
	keys := make([][]byte, len(s.toBatch))
	for j, i := range s.toBatch {
		keys[j] = tx.keys[i]
	}
	return transfer.GroupRuns(keys)
}

// prepareShares, phase 1 for the given shares: every owner stages its
// share and says what it needs. An owner gossip suspects is not asked (it
// fails with errSuspect), and from now on the shares are watched for
// suspicion until the write ends.
func (tx *writeTx) prepareShares(ctx context.Context, shares map[string]*ownerShare) {
	tx.watch.add(tx.c, shares)
	parallel(shares, func(s *ownerShare) {
		if tx.c.cutIfSuspected(s) {
			s.fail(errSuspect)
			return
		}
		var need []uint32
		var votes []*kvringv1.ChunkVote
		err := tx.c.taught(ctx, s.member, tx.ref.GetName(), func() (err error) {
			need, votes, err = tx.begin(ctx, s) // a new session each time (cut with s.life)
			return err
		})
		if err != nil {
			s.fail(err)
			return
		}
		for _, n := range need {
			if int(n) >= len(s.chunks) {
				s.fail(fmt.Errorf("asked for chunk %d of %d", n, len(s.chunks)))
				return
			}
			s.need[n] = true
		}
		for _, v := range votes {
			if int(v.GetIndex()) < len(s.chunks) {
				s.votes[v.GetIndex()] = v
			}
		}
	})
}

// plan decides, per chunk, whether its bytes are sent (some owner needs
// them), whether its answer waits for another writer, or whether it is
// settled now; it returns the settled results.
func (tx *writeTx) plan() (settled []*kvringv1.PutChunkResult) {
	tx.sinks = make(map[uint32]*fanoutSink, len(tx.chunks))
	// One allocation each for the batch's sinks and their owner lists, not
	// one per chunk: a chunk's owners are a window of tos.
	sinks := make([]fanoutSink, len(tx.chunks))
	n := 0
	for _, o := range tx.owners {
		n += len(o)
	}
	tos := make([]*ownerShare, 0, n)
	for i := range tx.chunks {
		idx := uint32(i)
		from := len(tos)
		for _, s := range tx.owners[i] {
			if s.failed == nil && s.need[s.toShare[idx]] {
				tos = append(tos, s)
			}
		}
		to := tos[from:len(tos):len(tos)]
		switch {
		case len(to) > 0:
			tx.need = append(tx.need, idx)
			sinks[i] = fanoutSink{index: idx, shares: to, sent: tx.c.m.PeerSent, gate: &tx.gate}
			tx.sinks[idx] = &sinks[i]
		case tx.onRing && slices.ContainsFunc(tx.owners[i], func(s *ownerShare) bool { return s.failed == nil && isBusy(s.vote(idx)) }):
			tx.deferred = append(tx.deferred, idx) // answered after awaitOtherWriters
		default:
			settled = append(settled, tx.result(idx))
		}
	}
	return settled
}

// vote, prepare phase 2: every owner that was sent bytes votes on them.
func (tx *writeTx) vote() {
	parallel(tx.shares, func(s *ownerShare) {
		if s.failed != nil || len(s.need) == 0 {
			return
		}
		votes, err := s.sess.finish()
		for _, v := range votes {
			if !s.need[v.GetIndex()] {
				continue // a vote for a chunk this owner was not sent: ignore
			}
			s.votes[v.GetIndex()] = v
			if v.GetVote() == kvringv1.Vote_VOTE_READY {
				s.tokens[v.GetIndex()] = v.GetStageToken()
			}
		}
		if err != nil {
			s.fail(transfer.FromStatus(err)) // its ready chunks are aborted by commit
		}
	})
}

// commit seals, on every owner, what it voted ready, and aborts what an
// owner that failed since staged under tokens this write learnt. It runs
// to its own bound (CommitTimeout) even when the engine's call was
// cancelled, so no owner is left holding staged chunks it was told nothing
// about.
func (tx *writeTx) commit(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tx.c.cfg.CommitTimeout)
	defer cancel()
	parallel(tx.shares, func(s *ownerShare) {
		if len(s.tokens) == 0 {
			return
		}
		if s.failed != nil {
			s.abort(cctx)
			return
		}
		order := make([]uint32, 0, len(s.tokens))
		req := make([]*kvringv1.StagedChunk, 0, len(s.tokens))
		staged := make([]kvringv1.StagedChunk, len(s.tokens)) // one allocation for the batch
		for si, tok := range s.tokens {
			sc := &staged[len(order)]
			sc.StageToken, sc.Id = tok, s.chunks[si].GetId()
			order = append(order, si)
			req = append(req, sc)
		}
		res, err := s.sess.commit(cctx, tx.ref, req)
		if err != nil {
			s.fail(err)
			// The commit may not have reached the owner: free what it
			// staged (a token it sealed meanwhile is no longer known
			// there; the chunk is then held but reported failed, never
			// the other way round).
			s.abort(cctx)
			return
		}
		for k, r := range res {
			s.noteCommit(order[k], r)
		}
	})
}

// noteOutcomes tells the outage log how each peer did.
func (tx *writeTx) noteOutcomes(ctx context.Context) {
	for _, s := range tx.shares {
		if s.remote && (s.sess != nil || s.cause != nil) {
			tx.c.peers.note(ctx, s.member, s.cause)
		}
	}
}

// abort frees what the owners staged for a batch that is given up.
func (tx *writeTx) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), tx.c.cfg.CommitTimeout)
	defer cancel()
	parallel(tx.shares, func(s *ownerShare) {
		if s.sess == nil {
			return
		}
		s.sess.close()
		s.abort(ctx)
	})
}

// closeSessions releases what unfinished sessions hold and ends the
// shares' lives.
func (tx *writeTx) closeSessions() {
	for _, s := range tx.shares {
		if s.sess != nil {
			s.sess.close()
		}
		s.cut(nil)
	}
}

// abort frees what s's owner staged under the tokens this write learnt,
// unless gossip suspects the owner: waiting for it would hold the write up
// to ctx's end, and it frees them itself (see suspect.go).
func (s *ownerShare) abort(ctx context.Context) {
	if !s.cutBySuspicion() {
		s.sess.abort(ctx, s.tokenList())
	}
}

// noteCommit records an owner's commit result for the chunk at share
// index si: sealed, or its vote turned rejected (the owner's policy or
// budget declined it at the seal) or failed.
func (s *ownerShare) noteCommit(si uint32, r *kvringv1.CommitResult) {
	switch {
	case r.GetStatus() == kvringv1.CommitStatus_COMMIT_STATUS_SEALED:
		s.sealed[si] = true
	case transfer.CodeIs(r.GetCode(), store.ErrRejected):
		s.votes[si] = &kvringv1.ChunkVote{Index: si, Vote: kvringv1.Vote_VOTE_REJECTED, Reason: r.GetReason()}
	default:
		s.votes[si] = &kvringv1.ChunkVote{Index: si, Vote: kvringv1.Vote_VOTE_FAILED, Reason: "commit failed: " + r.GetReason()}
	}
}

// tokenList is the stage tokens of the share's ready chunks.
func (s *ownerShare) tokenList() []uint64 {
	toks := make([]uint64, 0, len(s.tokens))
	for _, t := range s.tokens {
		toks = append(toks, t)
	}
	return toks
}
