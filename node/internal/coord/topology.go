package coord

import (
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
)

// topologyOf describes ring r (nil: no ring yet) as seen by node self.
func topologyOf(r *ring.Ring, self string) *kvringv1.TopologyResponse {
	resp := &kvringv1.TopologyResponse{Self: &kvringv1.NodeRef{NodeId: self}}
	if r == nil {
		return resp
	}
	resp.Epoch = r.Epoch()
	cfg := r.Config()
	resp.Ring = &kvringv1.RingSettings{
		PartitionCount:    uint32(cfg.PartitionCount),
		ReplicationFactor: uint32(cfg.ReplicationFactor),
		Load:              cfg.Load,
		VirtualNodes:      uint32(cfg.VirtualNodes),
		Hasher:            cfg.Hasher,
		Fingerprint:       cfg.Fingerprint(),
	}
	members := r.Members() // sorted by ID
	resp.Members = make([]*kvringv1.NodeRef, len(members))
	for i, m := range members {
		resp.Members[i] = &kvringv1.NodeRef{NodeId: m.ID, GrpcAddr: m.Addr}
		if m.ID == self {
			resp.Self.GrpcAddr = m.Addr
		}
	}
	return resp
}
