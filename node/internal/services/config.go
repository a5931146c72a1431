package services

import (
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/kvring/kvring/node/internal/coord"
	"github.com/kvring/kvring/node/internal/owner"
	"github.com/kvring/kvring/node/internal/security"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
)

// Config is what New wires the services with. New fills no defaults: the
// node passes its validated node.Config's values (nodeServices), and the
// test clusters theirs. A zero field means what the part it is passed to
// makes of zero (coord.Config, owner.Config, spread.CounterConfig,
// namespace.RegistryConfig); the gRPC server's fields are required unless
// marked optional.
type Config struct {
	// Logger is the parts' logger (each adds its component). Required.
	Logger *slog.Logger
	// Now is every part's clock. Required.
	Now func() time.Time

	// MaxNamespaces bounds the registry (0: the registry's default);
	// ReservedNamespaces are names it keeps for the node (the Redis
	// port's default namespace).
	MaxNamespaces      int
	ReservedNamespaces []string
	// MaxReplicas is the ring's replication factor: the most owners a
	// namespace may ask for.
	MaxReplicas int
	// Replication and MinReplicas are the defaults of a namespace that
	// names none.
	Replication, MinReplicas int
	// MaxBatchChunks bounds the chunks of one call; MaxPinLease the
	// longest lookup lease.
	MaxBatchChunks int
	MaxPinLease    time.Duration
	// CommitTimeout, PeerTimeout, CoalescePeerHas, PutIdleTimeout,
	// PutMinRate and PutMaxAwaitingBegin are the coordinator's (node.Config
	// says what each does).
	CommitTimeout, PeerTimeout time.Duration
	CoalescePeerHas            bool
	PutIdleTimeout             time.Duration
	PutMinRate                 int64
	PutMaxAwaitingBegin        int
	// Spread configures hot-group spreading (node.SpreadConfig).
	Spread SpreadConfig
	// ClientGoneGrace is how long a client whose last connection closed
	// keeps its lookup leases (clientConns).
	ClientGoneGrace time.Duration

	// The gRPC server's limits (node.Config says what each does; a
	// negative MaxConnIdle or MaxConnAge: none).
	MaxRecvMsgBytes, MaxStreamsPerConn       int
	KeepaliveMinTime                         time.Duration
	KeepaliveTime, KeepaliveTimeout          time.Duration
	MaxConnIdle, MaxConnAge, MaxConnAgeGrace time.Duration

	// Credentials authenticate calls and peer connections. Optional (nil:
	// no security).
	Credentials *security.Credentials

	// Test hooks, all optional: AdjustOwner and AdjustCoord change the
	// owner's and the coordinator's configuration before they are made,
	// WrapPeer wraps the Peer service (a fault injected in an owner), and
	// ServerOptions are added to the gRPC server's (an interceptor that
	// watches or holds calls).
	AdjustOwner   func(*owner.Config)
	AdjustCoord   func(*coord.Config)
	WrapPeer      func(kvringv1.PeerServer) kvringv1.PeerServer
	ServerOptions []grpc.ServerOption
}

// SpreadConfig configures hot-group spreading (node.SpreadConfig: a
// negative Threshold spreads nothing).
type SpreadConfig struct {
	Threshold int
	Window    time.Duration
	Width     int
	TTL       time.Duration
}
