package owner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/tenant"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// Service adapts an Owner to the generated Peer gRPC service. Every error it
// returns is built by transfer.ToStatus.
type Service struct {
	kvringv1.UnimplementedPeerServer
	o *Owner
	m *metrics.Set
}

// callerAt names the caller of a connection from addr (callerOf).
func callerAt(addr net.Addr) string { return "peer " + addr.String() }

// callerOf names the Peer caller a stage token is bound to: the remote
// address of its connection (a coordinator's prepare, commit and abort to
// one owner share one connection), never "" (the in-process caller).
func callerOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return callerAt(p.Addr)
	}
	return "peer unknown"
}

// NewService returns the Peer service of o.
func NewService(o *Owner) *Service { return &Service{o: o, m: o.cfg.Metrics} }

// Prepare runs one batch's prepare phase: begin, need, frames, end, votes.
// Frames are read in place from gRPC's buffers (transfer.InFrame) and copied
// once, into the chunks' slots.
func (s *Service) Prepare(stream grpc.BidiStreamingServer[kvringv1.PrepareRequest, kvringv1.PrepareResponse]) error {
	defer metrics.ObserveSince(s.m.PrepareSeconds, time.Now())
	o := s.o
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return transfer.ToStatus(fmt.Errorf("%w: prepare stream ended before its begin message", transfer.ErrInvalidArgument))
	}
	if err != nil {
		return transfer.ToStatus(transfer.RecvError(err))
	}
	begin := first.GetBegin()
	if begin == nil {
		return transfer.ToStatus(fmt.Errorf("%w: the first prepare message must be begin", transfer.ErrInvalidArgument))
	}
	// The coordinator names the engine it writes for; its own writes
	// (hand-off, spread copies) are charged to the calling node.
	client := tenant.Incoming(stream.Context(), callerOf(stream.Context()))
	p, need, votes, err := o.newPrepare(client, begin.GetNamespace(), begin.GetChunks(), begin.GetGroups(), nil)
	if err != nil {
		return transfer.ToStatus(err)
	}
	p.caller = callerOf(stream.Context())
	if begin.GetSpreadWidth() > 1 && len(begin.GetGroups()) > 0 {
		o.holdSpread(begin.GetNamespace(), begin.GetGroups(), begin.GetSpreadWidth(), time.Duration(begin.GetSpreadTtlMs())*time.Millisecond)
	} else {
		o.notePlaced(p)
	}
	ok := false
	defer func() {
		if !ok {
			p.Abort()
		}
	}()
	if err := stream.Send(&kvringv1.PrepareResponse{Epoch: o.Epoch(), Msg: &kvringv1.PrepareResponse_Need{
		Need: &kvringv1.PrepareNeed{Need: need, Votes: votes}}}); err != nil {
		return err
	}
	if err := s.receiveFrames(stream, p); err != nil {
		return transfer.ToStatus(err)
	}
	ok = true
	voted := o.EndPrepare(p)
	err = stream.Send(&kvringv1.PrepareResponse{Epoch: o.Epoch(), Msg: &kvringv1.PrepareResponse_Votes{
		Votes: &kvringv1.PrepareVotes{Votes: voted}}})
	if err == nil {
		err = awaitHalfClose(stream)
	}
	if err != nil {
		// The coordinator may never have had the votes: nobody else knows
		// the tokens, so nobody would commit or abort what they stage.
		o.AbortTokens(p.caller, readyTokens(voted))
		return transfer.ToStatus(err)
	}
	return nil
}

// awaitHalfClose waits, after the votes went out, for the coordinator to
// half-close the stream, which it does once it has them: the stage tokens
// are then its to commit or abort. Any other end (the stream cancelled,
// the connection lost, a message after the end) is an error. A
// coordinator that half-closed before asking for the votes (older
// versions) is seen at once.
func awaitHalfClose(stream grpc.BidiStreamingServer[kvringv1.PrepareRequest, kvringv1.PrepareResponse]) error {
	_, err := stream.Recv()
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return fmt.Errorf("prepare stream ended before the votes were taken: %w", transfer.RecvError(err))
	}
	return fmt.Errorf("%w: a message after the end of a prepare stream", transfer.ErrInvalidArgument)
}

// readyTokens are the stage tokens of the votes that are ready.
func readyTokens(votes []*kvringv1.ChunkVote) []uint64 {
	var toks []uint64
	for _, v := range votes {
		if v.GetVote() == kvringv1.Vote_VOTE_READY {
			toks = append(toks, v.GetStageToken())
		}
	}
	return toks
}

// receiveFrames hands the stream's frames to p until end or half-close.
func (s *Service) receiveFrames(stream grpc.BidiStreamingServer[kvringv1.PrepareRequest, kvringv1.PrepareResponse], p *Prepare) error {
	in := transfer.InFrame{Msg: new(kvringv1.PrepareRequest), Field: transfer.PrepareDataField}
	defer in.Release()
	for {
		err := stream.RecvMsg(&in)
		if errors.Is(err, io.EOF) {
			return nil // half-close counts as end
		}
		if err != nil {
			return transfer.RecvError(err)
		}
		if in.Msg.(*kvringv1.PrepareRequest).GetEnd() != nil {
			return nil
		}
		f, isFrame := in.Frame()
		if !isFrame {
			return fmt.Errorf("%w: a second begin in one prepare stream", transfer.ErrInvalidArgument)
		}
		s.m.PeerReceived.Add(float64(f.Len()))
		err = p.Frame(f)
		in.Release()
		if err != nil {
			return err
		}
	}
}

// Commit seals the staged chunks the request names.
func (s *Service) Commit(ctx context.Context, req *kvringv1.CommitRequest) (*kvringv1.CommitResponse, error) {
	defer metrics.ObserveSince(s.m.CommitSeconds, time.Now())
	return &kvringv1.CommitResponse{Epoch: s.o.Epoch(), Results: s.o.Commit(callerOf(ctx), req.GetNamespace(), req.GetChunks())}, nil
}

// Abort frees the staged chunks of the request's tokens.
func (s *Service) Abort(ctx context.Context, req *kvringv1.AbortRequest) (*kvringv1.AbortResponse, error) {
	s.o.AbortTokens(callerOf(ctx), req.GetStageTokens())
	return &kvringv1.AbortResponse{Epoch: s.o.Epoch()}, nil
}

// Has answers which ids this node holds, pinning them under a lease if asked.
func (s *Service) Has(ctx context.Context, req *kvringv1.HasRequest) (*kvringv1.HasResponse, error) {
	defer metrics.ObserveSince(s.m.HasSeconds, time.Now())
	client := tenant.Incoming(ctx, callerOf(ctx))
	held, ttl, widths, err := s.o.LookupFrom(req.GetCaller().GetNodeId(), client, req.GetNamespace(), req.GetIds(), req.GetGroups(), req.GetPin())
	if err != nil {
		return nil, transfer.ToStatus(err)
	}
	s.o.cfg.Load.Add()
	resp := &kvringv1.HasResponse{Epoch: s.o.Epoch(), Held: held, LeaseTtlMs: uint32(ttl / time.Millisecond), SpreadWidth: widths,
		Load: s.o.cfg.Load.Rate()}
	if req.GetReportStaging() {
		resp.Staging = s.o.Staging(req.GetNamespace(), req.GetIds(), held)
	}
	return resp, nil
}

// Unpin ends the pins taken under the request's leases.
func (s *Service) Unpin(ctx context.Context, req *kvringv1.UnpinRequest) (*kvringv1.UnpinResponse, error) {
	s.o.Unpin(req.GetLeaseIds())
	return &kvringv1.UnpinResponse{Epoch: s.o.Epoch()}, nil
}

// Fetch streams the requested chunks in order: each a FOUND header and its
// frames, or a NOT_FOUND header with the reason.
func (s *Service) Fetch(req *kvringv1.FetchRequest, stream grpc.ServerStreamingServer[kvringv1.FetchResponse]) error {
	s.o.cfg.Load.Add()
	defer metrics.ObserveSince(s.m.FetchSeconds, time.Now())
	o := s.o
	ref := req.GetNamespace()
	if ref == nil || ref.GetName() == "" {
		return transfer.ToStatus(fmt.Errorf("%w: namespace is required", transfer.ErrInvalidArgument))
	}
	ids, err := ParseIDs(req.GetIds(), o.cfg.MaxBatch)
	if err != nil {
		return transfer.ToStatus(err)
	}
	ns := namespace.StoreName(ref.GetName(), ref.GetFingerprint())
	send := func(h *kvringv1.ChunkHeader, f *transfer.EncodedFrame) error {
		if h != nil {
			return stream.Send(&kvringv1.FetchResponse{Epoch: o.Epoch(), Msg: &kvringv1.FetchResponse_Header{Header: h}})
		}
		// Encoded by Send, its bytes copied once out of the store: gRPC
		// takes the buffer (the coordinator reads the epoch from headers).
		n := f.Len()
		if err := stream.SendMsg(f); err != nil {
			f.Release() // in case gRPC failed before it took it
			return err
		}
		s.m.PeerSent.Add(float64(n))
		return nil
	}
	for i, id := range ids {
		_, readErr, err := o.Send(ns, id, uint32(i), nil, send)
		if err == nil && readErr != nil {
			err = send(notFound(uint32(i), readErr), nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// PutNamespace merges a peer's namespace record and answers with the record
// this node holds afterwards.
func (s *Service) PutNamespace(ctx context.Context, req *kvringv1.PutNamespaceRequest) (*kvringv1.PutNamespaceResponse, error) {
	rec := req.GetNamespace()
	if rec == nil || rec.GetName() == "" || len(rec.GetFingerprint()) == 0 {
		return nil, transfer.ToStatus(fmt.Errorf("%w: namespace record with a name and fingerprint is required", transfer.ErrInvalidArgument))
	}
	held, accepted, err := s.o.cfg.Registry.MergePeer(rec)
	if err != nil {
		return nil, transfer.ToStatus(err)
	}
	return &kvringv1.PutNamespaceResponse{Epoch: s.o.Epoch(), Namespace: held, Accepted: accepted}, nil
}

// ListNamespaces answers with the records this node holds (all, or those
// named).
func (s *Service) ListNamespaces(ctx context.Context, req *kvringv1.ListNamespacesRequest) (*kvringv1.ListNamespacesResponse, error) {
	want := map[string]bool{}
	for _, n := range req.GetNames() {
		want[n] = true
	}
	var out []*kvringv1.NamespaceRecord
	for _, r := range s.o.cfg.Registry.List() {
		if len(want) == 0 || want[r.GetName()] {
			out = append(out, r)
		}
	}
	return &kvringv1.ListNamespacesResponse{Epoch: s.o.Epoch(), Namespaces: out}, nil
}
