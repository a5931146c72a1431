package coord

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/kvring/kvring/node/internal/namespace"
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
	c := s.c
	reg := namespace.Registration{Name: req.GetName(), Schema: req.GetSchema(),
		Replicas: req.GetReplicationFactor(), MinReplicas: req.GetMinReplicas(), Self: c.cfg.Self, Now: c.cfg.Now()}
	var rec *kvringv1.NamespaceRecord
	var created bool
	var err error
	if slices.Contains(metadata.ValueFromIncomingContext(ctx, transfer.RegisterExistingKey), "true") {
		rec, err = c.reg.Check(reg, c.cfg.Defaults)
		if errors.Is(err, transfer.ErrUnknownNamespace) && c.learnNamespace(ctx, reg.Name) {
			rec, err = c.reg.Check(reg, c.cfg.Defaults) // it was registered while this node was out of the ring
		}
	} else {
		rec, created, err = c.reg.Register(ctx, reg, c.cfg.Defaults, c.broadcast)
	}
	if err != nil {
		return nil, transfer.ToStatus(err)
	}
	return &kvringv1.RegisterNamespaceResponse{Epoch: c.epoch(), Namespace: rec, Created: created, Limits: c.cfg.Limits}, nil
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
