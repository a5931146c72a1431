// Package tenant names the client a call is made for, so that the budgets a
// node shares among clients (staged writes, pins, unsealed blobs; package
// fairshare) can charge each client its own share. The node's gRPC server
// names the client of every Cache call (Name) and puts it in the call's
// context (With); a coordinator passes it on to the owners it asks, in the
// metadata of its Peer calls (Outgoing), and an owner reads it back from
// there (Incoming). It holds no state and starts no goroutine.
package tenant

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"strings"

	"google.golang.org/grpc/metadata"
)

// MetadataKey is the Peer-call metadata that carries the client a
// coordinator asks for. Owners trust it because Peer calls come only from
// nodes (with a cluster key or TLS they are authenticated).
const MetadataKey = "kvring-client"

type ctxKey struct{}

// With returns ctx naming client as the client of the call.
func With(ctx context.Context, client string) context.Context {
	if client == "" {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, client)
}

// From returns the client ctx names, "" when none (the node's own work:
// hand-off, spread copies, recovery; it is charged to no client's share).
func From(ctx context.Context) string {
	c, _ := ctx.Value(ctxKey{}).(string)
	return c
}

// Outgoing returns ctx with the client of ctx in its outgoing metadata, for
// a Peer call.
func Outgoing(ctx context.Context) context.Context {
	if c := From(ctx); c != "" {
		return metadata.AppendToOutgoingContext(ctx, MetadataKey, c)
	}
	return ctx
}

// Incoming returns the client a Peer call names in its metadata, else
// fallback (the calling node, so that its calls share one share).
func Incoming(ctx context.Context, fallback string) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(MetadataKey); len(v) > 0 && v[0] != "" && len(v[0]) <= 128 {
			return v[0]
		}
	}
	return fallback
}

// Name is the client of a Cache call: its bearer token when the node has a
// tokens file (one share per token, however many connections carry it),
// else its remote address. Distinct hosts are told apart by IP address; on
// the loopback address, where every process of the host shares the IP, by
// connection (ip:port).
func Name(token string, addr net.Addr) string {
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		return "token:" + hex.EncodeToString(sum[:6])
	}
	if addr == nil {
		return ""
	}
	s := addr.String()
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return "addr:" + s
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsLoopback() {
		return "addr:" + host
	}
	if strings.HasPrefix(s, "@") || s == "" {
		return ""
	}
	return "addr:" + s
}

// PerConnection reports whether client is a name Name gives one connection
// (a loopback caller without a token: "addr:127.0.0.1:port"): no later
// connection can carry it.
func PerConnection(client string) bool {
	s, ok := strings.CutPrefix(client, "addr:")
	if !ok {
		return false
	}
	_, _, err := net.SplitHostPort(s)
	return err == nil
}
