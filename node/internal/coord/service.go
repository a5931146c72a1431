package coord

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// Service adapts a Coordinator to the generated engine-facing Cache gRPC
// service. Every error it returns is built by transfer.ToStatus.
type Service struct {
	kvringv1.UnimplementedCacheServer
	c *Coordinator
}

// NewService returns the Cache service of c.
func NewService(c *Coordinator) *Service { return &Service{c: c} }

// RegisterNamespace registers a namespace's schema cluster-wide, or checks a
// client's schema against the registered one. A different schema under the
// same name is FailedPrecondition naming the fields that differ. A call
// with the metadata transfer.RegisterExistingKey ("true"), a client's read,
// only checks: a name neither this node nor the few members it asks
// (learnNamespace) know is FailedPrecondition (ErrUnknownNamespace), and
// nothing is registered.
func (s *Service) RegisterNamespace(ctx context.Context, req *kvringv1.RegisterNamespaceRequest) (*kvringv1.RegisterNamespaceResponse, error) {
	existing := slices.Contains(metadata.ValueFromIncomingContext(ctx, transfer.RegisterExistingKey), "true")
	resp, err := s.c.Register(ctx, req, existing)
	if err != nil {
		return nil, transfer.ToStatus(err)
	}
	return resp, nil
}

// Put runs a two-phase confirmed write (see put.go).
func (s *Service) Put(stream grpc.BidiStreamingServer[kvringv1.PutRequest, kvringv1.PutResponse]) error {
	return s.c.put(stream)
}

// Lookup counts the leading ids held now (see lookup.go).
func (s *Service) Lookup(ctx context.Context, req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	resp, err := s.c.lookup(ctx, req)
	if err != nil {
		return nil, transfer.ToStatus(err)
	}
	return resp, nil
}

// ReleaseLease ends a lookup lease's pins early.
func (s *Service) ReleaseLease(ctx context.Context, req *kvringv1.ReleaseLeaseRequest) (*kvringv1.ReleaseLeaseResponse, error) {
	return &kvringv1.ReleaseLeaseResponse{Epoch: s.c.epoch(), Released: s.c.releaseLease(ctx, req.GetLeaseId())}, nil
}

// Get streams chunks with owner fallback (see get.go).
func (s *Service) Get(req *kvringv1.GetRequest, stream grpc.ServerStreamingServer[kvringv1.GetResponse]) error {
	return s.c.get(req, stream)
}

// Topology answers with this node's ring view: epoch, members and ring
// settings, from which a client rebuilds the same placement and sends each
// chunk straight to its primary owner. It reads one ring snapshot, so the
// epoch, members and settings always belong together. A node without a ring
// yet answers with epoch 0 and no members. It never fails and never blocks.
func (s *Service) Topology(_ context.Context, _ *kvringv1.TopologyRequest) (*kvringv1.TopologyResponse, error) {
	return topologyOf(s.c.cfg.Ring(), s.c.cfg.Self), nil
}
