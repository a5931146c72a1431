package coord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// putStream is the engine's side of a Put call.
type putStream = grpc.BidiStreamingServer[kvringv1.PutRequest, kvringv1.PutResponse]

// putTx is one engine Put, a two-phase confirmed write of a batch. Its
// methods are its phases, in the order put runs them: place, prepare, plan,
// receive, vote, commit, resolveBusy, results. Not safe for concurrent use
// (a phase fans out over the owners itself).
type putTx struct {
	c           *Coordinator
	ref         *kvringv1.NamespaceRef
	chunks      []*kvringv1.ChunkRef // the engine's batch
	keys        [][]byte             // per batch index: its ring key (the id, or its group's key)
	grouped     bool                 // keys are group keys: the owners are sent them
	eager       bool                 // the engine sends every chunk's bytes without a need message (PutBegin.eager)
	ring        *ring.Ring           // the ring the chunks were placed on
	replicas    int
	minReplicas int
	shares      map[string]*ownerShare // by node id
	owners      [][]*ownerShare        // per batch index: the shares of its owners
	need        []uint32               // batch indexes whose bytes the engine sends
	deferred    []uint32               // batch indexes another writer was staging on some owner
	sinks       map[uint32]*fanoutSink
	gate        sinkGate      // closed when the put is abandoned for idleness
	blobs       []*store.Blob // a publish (publish.go): per batch index, the blob holding its bytes; nil for a Put
}

// put runs one engine Put stream: begin, need, data, end, result; or, for an
// eager engine, begin, data, end, result (the need exchange skipped: bytes
// nobody needs are discarded as they arrive). Bad input
// ends the call with InvalidArgument; an unknown namespace or a schema
// mismatch with FailedPrecondition; everything about a chunk's fate is in its
// result.
func (c *Coordinator) put(stream putStream) error {
	defer metrics.ObserveSince(c.m.PutSeconds, time.Now())
	ctx := stream.Context()
	tx, err := c.beginPut(stream)
	if err != nil {
		return transfer.ToStatus(err)
	}
	if err := tx.place(); err != nil {
		return transfer.ToStatus(err)
	}
	defer tx.closeSessions()
	tx.prepare(ctx)
	tx.substitute(ctx, tx.ring)
	settled := tx.plan()
	if !tx.eager { // an eager engine sends every chunk's bytes without asking, and hears only the result
		if err := stream.Send(&kvringv1.PutResponse{Epoch: c.epoch(), Msg: &kvringv1.PutResponse_Need{
			Need: &kvringv1.PutNeed{Need: tx.need, Settled: settled}}}); err != nil {
			return err
		}
	}
	c.countPut(settled, tx.chunks)
	if err := tx.receive(stream); err != nil {
		return transfer.ToStatus(err)
	}
	tx.vote()
	tx.commit(ctx)
	tx.noteOutcomes(ctx)
	c.awaitOtherWriters(ctx, tx.ref, tx.shares)
	results := tx.results()
	c.countPut(results, tx.chunks)
	if tx.eager {
		results = append(settled, results...)
	}
	return stream.Send(&kvringv1.PutResponse{Epoch: c.epoch(), Msg: &kvringv1.PutResponse_Result{
		Result: &kvringv1.PutResult{Results: results}}})
}

// beginPut reads the stream's begin message and checks the batch.
func (c *Coordinator) beginPut(stream putStream) (*putTx, error) {
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: put stream ended before its begin message", transfer.ErrInvalidArgument)
	}
	if err != nil {
		return nil, transfer.RecvError(err)
	}
	begin := first.GetBegin()
	if begin == nil {
		return nil, fmt.Errorf("%w: the first put message must be begin", transfer.ErrInvalidArgument)
	}
	return c.newPutTx(begin)
}

// newPutTx checks a put's begin message and places its chunks' keys.
func (c *Coordinator) newPutTx(begin *kvringv1.PutBegin) (*putTx, error) {
	_, rec, err := c.reg.Resolve(begin.GetNamespace())
	if err != nil {
		return nil, err
	}
	if _, err := owner.ValidateChunks(begin.GetChunks(), c.local.MaxChunk(), c.cfg.MaxBatch); err != nil {
		return nil, err
	}
	rawIDs := make([][]byte, len(begin.GetChunks()))
	for i, ch := range begin.GetChunks() {
		rawIDs[i] = ch.GetId()
	}
	pl, err := place(rec, rawIDs, begin.GetGroups())
	if err != nil {
		return nil, err
	}
	tx := &putTx{c: c, ref: nsRef(rec), chunks: begin.GetChunks(), keys: pl.keys, grouped: pl.grouped, eager: begin.GetEager(), shares: map[string]*ownerShare{}}
	tx.replicas, tx.minReplicas = replication(rec)
	return tx, nil
}

// place gives every chunk its owners and every owner its share.
func (tx *putTx) place() error {
	rg, err := tx.c.currentRing()
	if err != nil {
		return err
	}
	tx.ring = rg
	tx.owners = make([][]*ownerShare, len(tx.chunks))
	for i, ch := range tx.chunks {
		for _, m := range tx.c.writeOwners(rg, tx.ref.GetName(), tx.keys[i], tx.replicas) {
			s := tx.shares[m.ID]
			if s == nil {
				s = newOwnerShare(m, tx.c.cfg.Self)
				tx.shares[m.ID] = s
			}
			s.add(uint32(i), ch)
			tx.owners[i] = append(tx.owners[i], s)
		}
	}
	return nil
}

// begin opens a prepare session with s's owner and sends it s's chunks.
func (tx *putTx) begin(ctx context.Context, s *ownerShare) ([]uint32, []*kvringv1.ChunkVote, error) {
	if s.sess != nil {
		s.sess.close()
	}
	sess, err := tx.session(s)
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
func (tx *putTx) runs(s *ownerShare) []*kvringv1.GroupRun {
	if !tx.grouped {
		return nil
	}
	keys := make([][]byte, len(s.toBatch))
	for j, i := range s.toBatch {
		keys[j] = tx.keys[i]
	}
	return transfer.GroupRuns(keys)
}

// prepare, phase 1: every owner stages its share and says what it needs.
func (tx *putTx) prepare(ctx context.Context) { tx.prepareShares(ctx, tx.shares) }

// prepareShares runs phase 1 for the given shares.
func (tx *putTx) prepareShares(ctx context.Context, shares map[string]*ownerShare) {
	parallel(shares, func(s *ownerShare) {
		var need []uint32
		var votes []*kvringv1.ChunkVote
		err := tx.c.taught(ctx, s.member, tx.ref.GetName(), func() (err error) {
			need, votes, err = tx.begin(ctx, s) // a new session each time
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

// plan decides, per chunk, whether the engine sends its bytes (some owner
// needs them), whether its answer waits for another writer, or whether it is
// settled now; it returns the settled results.
func (tx *putTx) plan() (settled []*kvringv1.PutChunkResult) {
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
		case slices.ContainsFunc(tx.owners[i], func(s *ownerShare) bool { return s.failed == nil && isBusy(s.vote(idx)) }):
			tx.deferred = append(tx.deferred, idx) // answered after awaitOtherWriters
		default:
			settled = append(settled, tx.result(idx))
		}
	}
	return settled
}

// receive takes the engine's frames and forwards each to the owners that
// need it. Bad framing or a short stream aborts what the owners staged.
func (tx *putTx) receive(stream putStream) error {
	var last atomic.Int64
	last.Store(tx.c.cfg.Now().UnixNano())
	seen := func() { last.Store(tx.c.cfg.Now().UnixNano()) }
	if len(tx.need) == 0 {
		return tx.c.idleWatch(func() error { return drainPut(stream, seen) }, &last)
	}
	needed := make(map[uint32]bool, len(tx.need))
	for _, idx := range tx.need {
		needed[idx] = true
	}
	asm := transfer.NewAssembler(tx.chunks, needed)
	for idx, s := range tx.sinks {
		_ = asm.SetSink(idx, s) // idx is needed: SetSink cannot fail
	}
	if err := tx.c.idleWatch(func() error { return receiveFrames(stream, asm, seen) }, &last); err != nil {
		tx.gate.close() // an abandoned receiver forwards nothing more
		tx.abort()
		return err
	}
	return nil
}

// vote, prepare phase 2: every owner that was sent bytes votes on them.
func (tx *putTx) vote() {
	parallel(tx.shares, func(s *ownerShare) {
		if s.failed != nil || len(s.need) == 0 {
			return
		}
		votes, err := s.sess.finish()
		if err != nil {
			s.fail(transfer.FromStatus(err))
			return
		}
		for _, v := range votes {
			if !s.need[v.GetIndex()] {
				continue // a vote for a chunk this owner was not sent: ignore
			}
			s.votes[v.GetIndex()] = v
			if v.GetVote() == kvringv1.Vote_VOTE_READY {
				s.tokens[v.GetIndex()] = v.GetStageToken()
			}
		}
	})
}

// commit seals, on every owner, what it voted ready. It runs to its own
// bound (CommitTimeout) even when the engine's call was cancelled, so no
// owner is left holding staged chunks it was told nothing about.
func (tx *putTx) commit(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tx.c.cfg.CommitTimeout)
	defer cancel()
	parallel(tx.shares, func(s *ownerShare) {
		if s.failed != nil || len(s.tokens) == 0 {
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
			return
		}
		for k, r := range res {
			si := order[k]
			switch {
			case r.GetStatus() == kvringv1.CommitStatus_COMMIT_STATUS_SEALED:
				s.sealed[si] = true
			case transfer.CodeIs(r.GetCode(), store.ErrRejected):
				// The owner's policy or budget declined the chunk at the seal.
				s.votes[si] = &kvringv1.ChunkVote{Index: si, Vote: kvringv1.Vote_VOTE_REJECTED, Reason: r.GetReason()}
			default:
				s.votes[si] = &kvringv1.ChunkVote{Index: si, Vote: kvringv1.Vote_VOTE_FAILED, Reason: "commit failed: " + r.GetReason()}
			}
		}
	})
}

// noteOutcomes tells the outage log how each peer did.
func (tx *putTx) noteOutcomes(ctx context.Context) {
	for _, s := range tx.shares {
		if s.remote && (s.sess != nil || s.cause != nil) {
			tx.c.peers.note(ctx, s.member, s.cause)
		}
	}
}

// results decides the fate of every chunk the engine has no answer for yet.
func (tx *putTx) results() []*kvringv1.PutChunkResult {
	out := make([]*kvringv1.PutChunkResult, 0, len(tx.need)+len(tx.deferred))
	for _, idx := range slices.Concat(tx.need, tx.deferred) {
		out = append(out, tx.result(idx))
	}
	return out
}

// abort frees what the owners staged for a batch that is given up.
func (tx *putTx) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), tx.c.cfg.CommitTimeout)
	defer cancel()
	parallel(tx.shares, func(s *ownerShare) {
		if s.sess == nil {
			return
		}
		s.sess.close()
		toks := make([]uint64, 0, len(s.tokens))
		for _, t := range s.tokens {
			toks = append(toks, t)
		}
		s.sess.abort(ctx, toks)
	})
}

// closeSessions releases what unfinished sessions hold.
func (tx *putTx) closeSessions() {
	for _, s := range tx.shares {
		if s.sess != nil {
			s.sess.close()
		}
	}
}

// receiveFrames reads data frames until end or half-close. A stream that
// ends with chunks still short is bad input. Frame bytes are not copied out
// of gRPC's receive buffers: each frame goes to its sink and is released.
func receiveFrames(stream putStream, asm *transfer.Assembler, seen func()) error {
	in := transfer.InFrame{Msg: new(kvringv1.PutRequest), Field: transfer.PutDataField}
	defer in.Release()
	for {
		err := stream.RecvMsg(&in)
		seen()
		if errors.Is(err, io.EOF) || (err == nil && in.Msg.(*kvringv1.PutRequest).GetEnd() != nil) {
			if missing := asm.Missing(); len(missing) > 0 {
				return fmt.Errorf("%w: the put stream ended before the bytes of chunks %v were complete", transfer.ErrIncompleteStream, missing)
			}
			return nil
		}
		if err != nil {
			return transfer.RecvError(err)
		}
		f, ok := in.Frame()
		if !ok {
			return fmt.Errorf("%w: a second begin in one put stream", transfer.ErrInvalidArgument)
		}
		_, err = asm.AddFrame(f)
		in.Release()
		if err != nil {
			return err
		}
	}
}

// drainPut waits for the engine's end when no bytes are needed. Frames for
// chunks nobody needs are ignored, without being copied.
func drainPut(stream putStream, seen func()) error {
	in := transfer.InFrame{Msg: new(kvringv1.PutRequest), Field: transfer.PutDataField}
	defer in.Release()
	for {
		err := stream.RecvMsg(&in)
		seen()
		in.Release()
		if errors.Is(err, io.EOF) || (err == nil && in.Msg.(*kvringv1.PutRequest).GetEnd() != nil) {
			return nil
		}
		if err != nil {
			return transfer.RecvError(err)
		}
	}
}
