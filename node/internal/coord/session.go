package coord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/node/internal/owner"
	"github.com/kvring/kvring/node/internal/tenant"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// putSession is one owner's side of a two-phase write of a batch, as the
// coordinator drives it: begin (stage, learn what is needed), send frames,
// finish (votes), commit or abort. Indexes are the owner's own (positions in
// the chunks it was given). Not safe for concurrent use.
type putSession interface {
	// begin opens the prepare and stages chunks. runs are the chunks'
	// placement keys (empty: placed by their ids).
	begin(ctx context.Context, ref *kvringv1.NamespaceRef, chunks []*kvringv1.ChunkRef, runs []*kvringv1.GroupRun) (need []uint32, votes []*kvringv1.ChunkVote, err error)
	// send passes one frame on; its bytes are not kept after it returns.
	send(f transfer.Frame) error
	// finish ends the data phase and returns the owner's votes. With an
	// error, the votes are those that arrived before it (the caller aborts
	// the ones that are ready: nobody else knows their tokens).
	finish() ([]*kvringv1.ChunkVote, error)
	commit(ctx context.Context, ref *kvringv1.NamespaceRef, chunks []*kvringv1.StagedChunk) ([]*kvringv1.CommitResult, error)
	abort(ctx context.Context, tokens []uint64)
	// close releases what an unfinished session holds (staged slots).
	close()
}

// sessionOpener opens the session of a write with owner m: in process for
// this node (slot, when set, may give a chunk its slot complete: a
// publish's blob), over the Peer service for a peer (spread marks the
// chunks as spread copies). life bounds everything the session waits for
// (its end cuts the session: see suspect.go). A field of the Coordinator,
// so that tests of the write can put fake owners in its place.
type sessionOpener func(life context.Context, m ring.Member, slot owner.SlotFunc, spread spreadMark) (putSession, error)

// openSession is the Coordinator's sessionOpener.
func (c *Coordinator) openSession(life context.Context, m ring.Member, slot owner.SlotFunc, spread spreadMark) (putSession, error) {
	if m.ID == c.cfg.Self {
		return &localSession{o: c.local, slot: slot}, nil
	}
	pc, err := c.peer(m)
	if err != nil {
		return nil, err
	}
	return &remoteSession{c: pc, caller: c.caller(), timeout: c.cfg.PeerTimeout, spread: spread, life: life}, nil
}

// spreadMark is what a prepare says of spread copies (zero: an ordinary
// write).
type spreadMark struct{ width, ttlMs uint32 }

// localSession drives this node's own owner in process: no network hop.
type localSession struct {
	o *owner.Owner
	p *owner.Prepare
	// slot, when set, gives chunks their slots complete (a publish's
	// blobs): the frames sent for those are discarded unread.
	slot owner.SlotFunc
}

func (s *localSession) begin(ctx context.Context, ref *kvringv1.NamespaceRef, chunks []*kvringv1.ChunkRef, runs []*kvringv1.GroupRun) ([]uint32, []*kvringv1.ChunkVote, error) {
	p, need, votes, err := s.o.NewPrepareFrom(tenant.From(ctx), ref, chunks, runs, s.slot)
	s.p = p
	return need, votes, err
}

func (s *localSession) send(f transfer.Frame) error { return s.p.Frame(f) }

func (s *localSession) finish() ([]*kvringv1.ChunkVote, error) { return s.o.EndPrepare(s.p), nil }

func (s *localSession) commit(_ context.Context, ref *kvringv1.NamespaceRef, chunks []*kvringv1.StagedChunk) ([]*kvringv1.CommitResult, error) {
	return s.o.Commit("", ref, chunks), nil
}

func (s *localSession) abort(_ context.Context, tokens []uint64) { s.o.AbortTokens("", tokens) }

func (s *localSession) close() {
	if s.p != nil && !s.p.Done() {
		s.p.Abort()
	}
}

// remoteSession drives a peer's owner over the Peer service. Its Prepare
// stream follows the write's context only until the data phase ends: once
// the owner is asked for its votes, it may stage chunks under tokens only
// this session learns, so an engine that goes away then must not cut the
// stream (the write then runs to its commit, bounded by the timeouts).
type remoteSession struct {
	c      kvringv1.PeerClient
	caller *kvringv1.PeerCaller
	stream grpc.BidiStreamingClient[kvringv1.PrepareRequest, kvringv1.PrepareResponse]
	cancel context.CancelFunc
	// unfollow stops the write's context from cancelling the stream.
	unfollow func() bool
	// timeout bounds each step with the owner (begin, one frame, finish,
	// commit), so a stuck owner fails its share instead of the whole call.
	timeout time.Duration
	// spread marks the chunks as spread copies of hot groups (Copy).
	spread spreadMark
	// life ends the stream and a commit in flight whenever it ends (the
	// owner is suspected by gossip, or the write is over).
	life context.Context
}

// watch cancels the session's stream if the step that called it takes
// longer than the timeout; call the returned function when the step is
// done: it reports whether the step ended in time.
func (s *remoteSession) watch() func() bool {
	return time.AfterFunc(s.timeout, s.cancel).Stop
}

func (s *remoteSession) begin(ctx context.Context, ref *kvringv1.NamespaceRef, chunks []*kvringv1.ChunkRef, runs []*kvringv1.GroupRun) ([]uint32, []*kvringv1.ChunkVote, error) {
	// The owner charges the staged slots to the engine's share.
	sctx, cancel := context.WithCancel(tenant.Outgoing(context.WithoutCancel(ctx)))
	s.cancel = cancel
	s.unfollow = context.AfterFunc(ctx, cancel)
	context.AfterFunc(s.life, cancel) // ends with the write at the latest
	defer s.watch()()
	stream, err := s.c.Prepare(sctx)
	if err != nil {
		return nil, nil, err
	}
	s.stream = stream
	if err := stream.Send(&kvringv1.PrepareRequest{Msg: &kvringv1.PrepareRequest_Begin{Begin: &kvringv1.PrepareBegin{
		Caller: s.caller, Namespace: ref, Chunks: chunks, Groups: runs,
		SpreadWidth: s.spread.width, SpreadTtlMs: s.spread.ttlMs}}}); err != nil {
		return nil, nil, recvErr(stream, err)
	}
	m, err := stream.Recv()
	if err != nil {
		return nil, nil, err
	}
	need := m.GetNeed()
	if need == nil {
		return nil, nil, fmt.Errorf("peer answered prepare without a need message")
	}
	return need.GetNeed(), need.GetVotes(), nil
}

// recvErr replaces io.EOF from Send with the stream's real status.
func recvErr(stream grpc.BidiStreamingClient[kvringv1.PrepareRequest, kvringv1.PrepareResponse], err error) error {
	if errors.Is(err, io.EOF) {
		if _, rerr := stream.Recv(); rerr != nil {
			return rerr
		}
	}
	return err
}

// send copies the frame into a message for the peer (the pieces belong to
// the engine's stream and are released when send returns).
func (s *remoteSession) send(f transfer.Frame) error {
	defer s.watch()()
	if err := s.stream.SendMsg(&transfer.OutFrame{Field: transfer.PrepareDataField, Index: f.Index, Offset: f.Offset, Data: f.Data}); err != nil {
		return recvErr(s.stream, err)
	}
	return nil
}

// finish asks for the votes and half-closes the stream only once they
// arrived: an owner that voted ready keeps its stage tokens when the
// stream ends in a half-close, and aborts them when it ends otherwise (the
// votes may never have arrived). Votes that arrived with an error are
// returned with it, for the caller to abort.
func (s *remoteSession) finish() ([]*kvringv1.ChunkVote, error) {
	if s.unfollow != nil && !s.unfollow() {
		return nil, context.Canceled // the write's context ended before the votes were asked for
	}
	inTime := s.watch()
	if err := s.stream.Send(&kvringv1.PrepareRequest{Msg: &kvringv1.PrepareRequest_End{End: &kvringv1.PrepareEnd{}}}); err != nil {
		inTime()
		return nil, recvErr(s.stream, err)
	}
	m, err := s.stream.Recv()
	if err != nil {
		inTime()
		return nil, err
	}
	if m.GetVotes() == nil {
		inTime()
		return nil, fmt.Errorf("peer answered the end of prepare without votes")
	}
	votes := m.GetVotes().GetVotes()
	err = s.stream.CloseSend()
	if !inTime() && err == nil {
		err = fmt.Errorf("peer answered the end of prepare after %s: %w", s.timeout, context.DeadlineExceeded)
	}
	return votes, err
}

func (s *remoteSession) commit(ctx context.Context, ref *kvringv1.NamespaceRef, chunks []*kvringv1.StagedChunk) ([]*kvringv1.CommitResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	resp, err := s.c.Commit(ctx, &kvringv1.CommitRequest{Caller: s.caller, Namespace: ref, Chunks: chunks})
	if err != nil {
		return nil, transfer.FromStatus(err)
	}
	if len(resp.GetResults()) != len(chunks) {
		return nil, fmt.Errorf("peer answered %d commit results for %d chunks", len(resp.GetResults()), len(chunks))
	}
	return resp.GetResults(), nil
}

func (s *remoteSession) abort(ctx context.Context, tokens []uint64) {
	if len(tokens) > 0 {
		_, _ = s.c.Abort(ctx, &kvringv1.AbortRequest{Caller: s.caller, StageTokens: tokens})
	}
}

func (s *remoteSession) close() {
	if s.unfollow != nil {
		s.unfollow()
	}
	if s.cancel != nil {
		s.cancel()
	}
}
