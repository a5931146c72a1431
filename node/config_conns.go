package node

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvring/kvring/node/internal/netguard"
)

// ConnLimitsConfig caps the connections of the gRPC port (Config.Conns).
// Every listener of the node (gRPC, admin, local socket, Redis) also survives
// running out of descriptors: it backs off and retries, counts the failures
// (kvring_accept_errors_total) and the node reports not ready while one
// cannot accept (docs/reliability.md).
type ConnLimitsConfig struct {
	// GRPCMaxConns is the most gRPC connections (engines and peers) open at
	// once; one more is closed as soon as it is accepted and counted in
	// kvring_connections_refused_total{cap="node"}. Default 0: half the
	// process's descriptor limit (RLIMIT_NOFILE, read at Start), at most
	// 16384, so a flood of connections to the gRPC port leaves descriptors
	// for the local socket, segments, peers and the admin port. Negative: no
	// cap.
	GRPCMaxConns int
	// GRPCMaxConnsPerAddr is the most gRPC connections open at once from one
	// remote IP address; one more is closed as soon as it is accepted and
	// counted in kvring_connections_refused_total{cap="addr"}. An engine
	// or a peer keeps one or a few connections to a node, so one address
	// needs many only when many clients share it (NAT, or a host running
	// many engines). Default 1024; negative: no cap.
	GRPCMaxConnsPerAddr int
}

// maxDefaultGRPCConns bounds the default GRPCMaxConns.
const maxDefaultGRPCConns = 16384

// defaultGRPCConnsPerAddr is the default GRPCMaxConnsPerAddr.
const defaultGRPCConnsPerAddr = 1024

// grpcLimits resolves the configured caps of the gRPC listener into
// netguard's (0: no cap), reading RLIMIT_NOFILE for the default node cap.
func (c ConnLimitsConfig) grpcLimits() netguard.Limits {
	lim := netguard.Limits{MaxConns: c.GRPCMaxConns, MaxConnsPerAddr: c.GRPCMaxConnsPerAddr}
	if lim.MaxConns == 0 {
		lim.MaxConns = maxDefaultGRPCConns
		var rl unix.Rlimit
		if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur/2 < maxDefaultGRPCConns {
			lim.MaxConns = int(max(rl.Cur/2, 1))
		}
	}
	if lim.MaxConnsPerAddr == 0 {
		lim.MaxConnsPerAddr = defaultGRPCConnsPerAddr
	}
	lim.MaxConns, lim.MaxConnsPerAddr = max(lim.MaxConns, 0), max(lim.MaxConnsPerAddr, 0)
	return lim
}

// DefaultClientGoneGrace is Config.ClientGoneGrace's default: long enough
// for a client's SDK to reconnect after a blip or a connection the server
// closed for its age (its first retries come within a second or two), short
// against the leases it keeps (up to 5 minutes).
const DefaultClientGoneGrace = 5 * time.Second
