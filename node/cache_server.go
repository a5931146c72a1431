package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/transfer"
)

// cacheService is the engine-facing Cache gRPC service.
type cacheService struct {
	kvringv1.UnimplementedCacheServer
	c      *coordinator
	limits *kvringv1.Limits
	// broadcastTimeout bounds how long a registration waits for the other
	// members to answer.
	broadcastTimeout time.Duration
	maxReplicas      int
	// defaultReplicas and defaultMinReplicas apply when the first client of
	// a namespace does not choose.
	defaultReplicas, defaultMinReplicas uint32
}

// RegisterNamespace registers a namespace's schema cluster-wide, or checks a
// client's schema against the registered one. A different schema under the
// same name is FailedPrecondition naming the fields that differ.
func (s *cacheService) RegisterNamespace(ctx context.Context, req *kvringv1.RegisterNamespaceRequest) (*kvringv1.RegisterNamespaceResponse, error) {
	if err := validateSchema(req.GetName(), req.GetSchema()); err != nil {
		return nil, transfer.ToStatus(err)
	}
	rf, minR := req.GetReplicationFactor(), req.GetMinReplicas()
	if int(rf) > s.maxReplicas || int(minR) > s.maxReplicas {
		return nil, transfer.ToStatus(fmt.Errorf("%w: replication_factor %d / min_replicas %d: at most %d",
			transfer.ErrInvalidArgument, rf, minR, s.maxReplicas))
	}
	if rf != 0 && minR > rf {
		return nil, transfer.ToStatus(fmt.Errorf("%w: min_replicas %d is above replication_factor %d",
			transfer.ErrInvalidArgument, minR, rf))
	}
	if rf == 0 && minR > s.defaultReplicas && s.c.reg.get(req.GetName()) == nil {
		return nil, transfer.ToStatus(fmt.Errorf("%w: min_replicas %d is above the default replication factor %d: set replication_factor too",
			transfer.ErrInvalidArgument, minR, s.defaultReplicas))
	}
	fp := schemaFingerprint(req.GetSchema())
	c := s.c
	cur := c.reg.get(req.GetName())
	created := false
	if cur == nil {
		rec := &kvringv1.NamespaceRecord{Name: req.GetName(), Schema: req.GetSchema(), Fingerprint: fp,
			ReplicationFactor: s.defaultReplicas, MinReplicas: s.defaultMinReplicas, CreatedUnixMs: c.now().UnixMilli(), CreatedBy: c.self}
		if rf != 0 {
			rec.ReplicationFactor = rf
		}
		if minR != 0 {
			rec.MinReplicas = minR
		}
		if rec.GetMinReplicas() > rec.GetReplicationFactor() {
			rec.MinReplicas = rec.GetReplicationFactor() // the node default exceeds the client's factor
		}
		cur, created = c.reg.merge(rec)
		// Tell every member; a record registered earlier elsewhere wins.
		if winner := s.broadcast(ctx, cur); winner != nil {
			cur, _ = c.reg.merge(winner)
			created = created && cur.GetCreatedBy() == c.self && string(cur.GetFingerprint()) == string(fp)
		}
	}
	if string(cur.GetFingerprint()) != string(fp) {
		return nil, transfer.ToStatus(fmt.Errorf("%w: namespace %q is registered with a different schema: %s",
			transfer.ErrSchemaMismatch, req.GetName(), schemaDiff(cur.GetSchema(), req.GetSchema())))
	}
	if rf != 0 && rf != cur.GetReplicationFactor() {
		return nil, transfer.ToStatus(fmt.Errorf("%w: namespace %q has replication_factor %d, the client asked for %d",
			transfer.ErrSchemaMismatch, req.GetName(), cur.GetReplicationFactor(), rf))
	}
	if minR != 0 && minR != cur.GetMinReplicas() {
		return nil, transfer.ToStatus(fmt.Errorf("%w: namespace %q has min_replicas %d, the client asked for %d",
			transfer.ErrSchemaMismatch, req.GetName(), cur.GetMinReplicas(), minR))
	}
	return &kvringv1.RegisterNamespaceResponse{Epoch: c.epoch(), Namespace: cur, Created: created, Limits: s.limits}, nil
}

// broadcast offers a record to every other member and returns the record
// that wins over it, if any member holds one.
func (s *cacheService) broadcast(ctx context.Context, rec *kvringv1.NamespaceRecord) *kvringv1.NamespaceRecord {
	c := s.c
	r := c.ring()
	if r == nil {
		return nil
	}
	bctx, cancel := context.WithTimeout(ctx, s.broadcastTimeout)
	defer cancel()
	var mu sync.Mutex
	var winner *kvringv1.NamespaceRecord
	var wg sync.WaitGroup
	for _, m := range r.Members() {
		if m.ID == c.self {
			continue
		}
		wg.Add(1)
		go func(m ring.Member) {
			defer wg.Done()
			pc, err := c.pool.client(m.Addr)
			if err != nil {
				return
			}
			resp, err := pc.PutNamespace(bctx, &kvringv1.PutNamespaceRequest{Caller: c.caller(), Namespace: rec})
			c.peers.note(ctx, m, err) // an unreachable peer is logged once per outage, not per namespace
			if err != nil {
				if !peerUnreachable(err) {
					c.log.Warn("cannot tell a member about a namespace", "node", m.ID, "namespace", rec.GetName(), "err", err)
				}
				return
			}
			if held := resp.GetNamespace(); held != nil && !resp.GetAccepted() && wins(held, rec) {
				mu.Lock()
				if winner == nil || wins(held, winner) {
					winner = held
				}
				mu.Unlock()
			}
		}(m)
	}
	wg.Wait()
	return winner
}

func (s *cacheService) Put(stream grpc.BidiStreamingServer[kvringv1.PutRequest, kvringv1.PutResponse]) error {
	return s.c.put(stream)
}

func (s *cacheService) Lookup(ctx context.Context, req *kvringv1.LookupRequest) (*kvringv1.LookupResponse, error) {
	resp, err := s.c.lookup(ctx, req)
	if err != nil {
		return nil, transfer.ToStatus(err)
	}
	return resp, nil
}

func (s *cacheService) ReleaseLease(ctx context.Context, req *kvringv1.ReleaseLeaseRequest) (*kvringv1.ReleaseLeaseResponse, error) {
	return &kvringv1.ReleaseLeaseResponse{Epoch: s.c.epoch(), Released: s.c.releaseLease(ctx, req.GetLeaseId())}, nil
}

func (s *cacheService) Get(req *kvringv1.GetRequest, stream grpc.ServerStreamingServer[kvringv1.GetResponse]) error {
	return s.c.get(req, stream)
}
