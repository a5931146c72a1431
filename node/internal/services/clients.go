package services

import (
	"context"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/kvring/kvring/node/internal/security"
	"github.com/kvring/kvring/node/internal/tenant"
)

// clientNamer names the client of every Cache call (package tenant) and
// puts the name in the call's context, for the budgets shared among clients:
// staged bytes, pinned bytes; and tells conns which client the call's
// connection carries. Run after the security interceptors, so a token it
// reads was accepted.
type clientNamer struct {
	sec   *security.Credentials
	conns *clientConns
}

// callClient names the client of a Cache call and records it against the
// call's connection.
func (n clientNamer) callClient(ctx context.Context) context.Context {
	client := n.name(ctx)
	if addr := peerAddr(ctx); addr != nil && n.conns != nil {
		n.conns.named(addr.String(), client)
	}
	return tenant.With(ctx, client)
}

// name is the client of a Cache call: its token's when the node has a
// tokens file, else the remote address's.
func (n clientNamer) name(ctx context.Context) string {
	addr := peerAddr(ctx)
	if n.sec == nil {
		return tenant.Name("", addr)
	}
	tok := security.BearerToken(ctx)
	if !n.sec.TokensRequired() {
		tok = "" // without a tokens file a token proves nothing: it would let one host take many shares
	}
	return tenant.Name(tok, addr)
}

func (n clientNamer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if strings.HasPrefix(info.FullMethod, security.CachePrefix) {
		ctx = n.callClient(ctx)
	}
	return handler(ctx, req)
}

func (n clientNamer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if strings.HasPrefix(info.FullMethod, security.CachePrefix) {
		ss = &namedStream{ServerStream: ss, ctx: n.callClient(ss.Context())}
	}
	return handler(srv, ss)
}

// namedStream is a stream whose context names its client.
type namedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *namedStream) Context() context.Context { return s.ctx }

// peerAddr is the remote address of a call, nil when unknown.
func peerAddr(ctx context.Context) net.Addr {
	if p, ok := peer.FromContext(ctx); ok {
		return p.Addr
	}
	return nil
}

// serverOptions are the interceptors that name clients.
func (n clientNamer) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(n.unary), grpc.ChainStreamInterceptor(n.stream)}
}
