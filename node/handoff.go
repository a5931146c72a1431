package node

import (
	"context"
	"errors"

	"github.com/kvring/kvring/node/internal/admin"
	"github.com/kvring/kvring/node/internal/handoff"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// HandoffStatus is what the node's hand-off has done (GET /v1/handoff).
type HandoffStatus = handoff.Status

// Handoff returns the hand-off's status; false before Start.
func (n *Node) Handoff() (HandoffStatus, bool) {
	p := n.parts.Load()
	if p == nil {
		return HandoffStatus{}, false
	}
	return p.mover.Status(), true
}

// DrainResult is what Leave handed off.
type DrainResult = handoff.PassStats

// Leave drains the node before it stops: it announces the draining state
// (readiness and gRPC health go false, writes go to the next owners, reads
// keep finding what it holds), then hands every chunk it holds to the chunks' next
// owners, until all are handed off, no member is left to take them, or ctx
// ends. The result's Pending counts the chunks left behind; they are
// logged. Call Close afterwards. Blocks for the hand-off.
func (n *Node) Leave(ctx context.Context) (DrainResult, error) {
	p := n.parts.Load()
	if p == nil {
		return DrainResult{}, errors.New("cannot leave: the node has not started")
	}
	if err := p.admin.SetDraining(ctx, true); err != nil && !admin.NotServing(err) {
		return DrainResult{}, err
	}
	p.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING) // engines move to other nodes
	st := p.mover.Drain(ctx)
	args := []any{"handed_off", st.Copied, "evicted", st.Evicted, "left_behind", st.Pending, "no_owner", st.NoOwner,
		"unreachable", st.Unreachable}
	switch {
	case st.Pending == 0:
		n.log.Info("drain done: every chunk this node held is with its owners", args...)
	case st.Pending == st.NoOwner:
		n.log.Info("drain: no other member takes chunks; they stay in this node's store (served again if it restarts on its data directory)", args...)
	default:
		n.log.Warn("drain ended with chunks not handed off; they stay in this node's store and leave the cluster with it", append(args, "err", ctx.Err())...)
	}
	return st, nil
}
