package coord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// putSession is one owner's side of a two-phase write of a batch, as the
// coordinator drives it: begin (stage, learn what is needed), send frames,
// finish (votes), commit or abort. Indexes are the owner's own (positions in
// the chunks it was given). Not safe for concurrent use.
type putSession interface {
	// runs are the chunks' placement keys (empty: placed by their ids).
	begin(ctx context.Context, ref *kvringv1.NamespaceRef, chunks []*kvringv1.ChunkRef, runs []*kvringv1.GroupRun) (need []uint32, votes []*kvringv1.ChunkVote, err error)
	// send passes one frame on; its bytes are not kept after it returns.
	send(f transfer.Frame) error
	finish() ([]*kvringv1.ChunkVote, error)
	commit(ctx context.Context, ref *kvringv1.NamespaceRef, chunks []*kvringv1.StagedChunk) ([]*kvringv1.CommitResult, error)
	abort(ctx context.Context, tokens []uint64)
	// close releases what an unfinished session holds (staged slots).
	close()
}

// localSession drives this node's own owner in process: no network hop.
type localSession struct {
	o *owner.Owner
	p *owner.Prepare
}

func (s *localSession) begin(_ context.Context, ref *kvringv1.NamespaceRef, chunks []*kvringv1.ChunkRef, runs []*kvringv1.GroupRun) ([]uint32, []*kvringv1.ChunkVote, error) {
	p, need, votes, err := s.o.NewPrepare(ref, chunks, runs)
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

// remoteSession drives a peer's owner over the Peer service.
type remoteSession struct {
	c      kvringv1.PeerClient
	caller *kvringv1.PeerCaller
	stream grpc.BidiStreamingClient[kvringv1.PrepareRequest, kvringv1.PrepareResponse]
	cancel context.CancelFunc
	// timeout bounds each step with the owner (begin, one frame, finish,
	// commit), so a stuck owner fails its share instead of the whole call.
	timeout time.Duration
	// spread marks the chunks as spread copies of hot groups (SpreadCopy).
	spread spreadMark
}

// watch cancels the session's stream if the step that called it takes
// longer than the timeout; call the returned function when the step is done.
func (s *remoteSession) watch() func() bool {
	return time.AfterFunc(s.timeout, s.cancel).Stop
}

func (s *remoteSession) begin(ctx context.Context, ref *kvringv1.NamespaceRef, chunks []*kvringv1.ChunkRef, runs []*kvringv1.GroupRun) ([]uint32, []*kvringv1.ChunkVote, error) {
	sctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
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

func (s *remoteSession) finish() ([]*kvringv1.ChunkVote, error) {
	defer s.watch()()
	if err := s.stream.Send(&kvringv1.PrepareRequest{Msg: &kvringv1.PrepareRequest_End{End: &kvringv1.PrepareEnd{}}}); err != nil {
		return nil, recvErr(s.stream, err)
	}
	if err := s.stream.CloseSend(); err != nil {
		return nil, err
	}
	m, err := s.stream.Recv()
	if err != nil {
		return nil, err
	}
	if m.GetVotes() == nil {
		return nil, fmt.Errorf("peer answered the end of prepare without votes")
	}
	return m.GetVotes().GetVotes(), nil
}

func (s *remoteSession) commit(ctx context.Context, ref *kvringv1.NamespaceRef, chunks []*kvringv1.StagedChunk) ([]*kvringv1.CommitResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
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
	if s.cancel != nil {
		s.cancel()
	}
}

// session opens a put session with owner m: in process for this node, over
// the Peer service for a peer.
func (c *Coordinator) session(m ring.Member) (putSession, error) {
	if m.ID == c.cfg.Self {
		return &localSession{o: c.local}, nil
	}
	pc, err := c.peer(m)
	if err != nil {
		return nil, err
	}
	return &remoteSession{c: pc, caller: c.caller(), timeout: c.cfg.PeerTimeout}, nil
}
