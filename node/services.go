package node

import (
	"github.com/kvring/kvring/node/internal/security"
	"github.com/kvring/kvring/node/internal/services"
)

// servicesConfig is what node/internal/services wires a node's registry,
// owner, coordinator and gRPC server with: cfg's validated values and the
// node's credentials (nil: no security).
func servicesConfig(cfg *Config, sec *security.Credentials) *services.Config {
	return &services.Config{Logger: cfg.Logger, Now: cfg.Now,
		MaxNamespaces: cfg.MaxNamespaces, ReservedNamespaces: []string{cfg.RESP.KeyMap.DefaultNamespace()},
		MaxReplicas: cfg.Membership.Ring.ReplicationFactor, Replication: cfg.Replication, MinReplicas: cfg.MinReplicas,
		MaxBatchChunks: cfg.MaxBatchChunks, MaxPinLease: cfg.Store.MaxPinLease,
		CommitTimeout: cfg.CommitTimeout, PeerTimeout: cfg.PeerTimeout, CoalescePeerHas: cfg.CoalescePeerHas,
		PutIdleTimeout: cfg.PutIdleTimeout, PutMinRate: cfg.PutMinRate, PutMaxAwaitingBegin: cfg.PutMaxAwaitingBegin,
		Spread: services.SpreadConfig(cfg.Spread), ClientGoneGrace: cfg.ClientGoneGrace,
		MaxRecvMsgBytes: cfg.MaxRecvMsgBytes, MaxStreamsPerConn: cfg.MaxStreamsPerConn,
		KeepaliveMinTime: cfg.KeepaliveMinTime, KeepaliveTime: cfg.KeepaliveTime, KeepaliveTimeout: cfg.KeepaliveTimeout,
		MaxConnIdle: cfg.MaxConnIdle, MaxConnAge: cfg.MaxConnAge, MaxConnAgeGrace: cfg.MaxConnAgeGrace,
		Credentials: sec}
}
