package owner

import (
	"context"

	"google.golang.org/grpc/stats"
)

// ConnEnd is a gRPC server stats handler that frees, when a Peer connection
// ends, the chunks its caller staged and did not commit (AbortCaller). It
// never blocks for long.
type ConnEnd struct{ O *Owner }

type remoteKey struct{}

func (h ConnEnd) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (h ConnEnd) HandleRPC(context.Context, stats.RPCStats)                       {}

// TagConn remembers the connection's remote address, the caller its stage
// tokens are bound to (callerOf).
func (h ConnEnd) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if info.RemoteAddr == nil {
		return ctx
	}
	return context.WithValue(ctx, remoteKey{}, callerAt(info.RemoteAddr))
}

func (h ConnEnd) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnEnd); !ok {
		return
	}
	if caller, ok := ctx.Value(remoteKey{}).(string); ok {
		h.O.AbortCaller(caller)
	}
}
