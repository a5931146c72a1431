package security

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// Who may call what on the gRPC port (one listener; docs/security.md says
// why not two):
//   - /kvring.v1.Peer/*: only nodes. With TLS, the caller must present a
//     certificate the cluster CA signed with the serverAuth usage; with a
//     cluster key, the call must carry its HMAC. With both, both.
//   - /kvring.v1.Cache/*: with a tokens file, a bearer token that allows the
//     call's namespace (RegisterNamespace, Put, Lookup, Get), or any valid
//     token (Topology, ReleaseLease, which name no namespace).
//   - anything else (the gRPC health service): open, for probes and for the
//     SDK's connection checks.

const (
	peerPrefix = "/kvring.v1.Peer/"
	// CachePrefix starts the full method name of every Cache call.
	CachePrefix = "/kvring.v1.Cache/"
	// clusterAuthKey is the metadata key of the cluster key's HMAC.
	clusterAuthKey = "kvring-cluster-auth"
	// minTokenLen is the shortest bearer token a tokens file may list.
	minTokenLen = 16
)

// clusterAuthValue is what peer calls carry for a cluster key: an HMAC of a
// fixed label, so the key itself never leaves the node.
func clusterAuthValue(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("kvring peer auth v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// clusterKeyCreds sends the cluster key's HMAC with every peer call. It
// does not demand TLS: the cluster key is what protects a cluster without it.
type clusterKeyCreds struct{ value string }

func (c clusterKeyCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{clusterAuthKey: c.value}, nil
}
func (clusterKeyCreds) RequireTransportSecurity() bool { return false }

var _ credentials.PerRPCCredentials = clusterKeyCreds{}

func unauthenticated(format string, args ...any) error {
	return transfer.ToStatus(fmt.Errorf("%w: "+format, append([]any{transfer.ErrUnauthenticated}, args...)...))
}

func permissionDenied(format string, args ...any) error {
	return transfer.ToStatus(fmt.Errorf("%w: "+format, append([]any{transfer.ErrPermissionDenied}, args...)...))
}

// checkPeer authenticates a Peer call.
func (s *Credentials) checkPeer(ctx context.Context) error {
	if s.serverTLS != nil {
		if err := nodeCertificate(ctx); err != nil {
			return err
		}
	}
	if s.clusterAuth != "" {
		got := metadata.ValueFromIncomingContext(ctx, clusterAuthKey)
		if len(got) == 0 {
			return unauthenticated("peer call without the cluster key: the Peer service serves only nodes of this cluster (--cluster-key-file)")
		}
		if subtle.ConstantTimeCompare([]byte(got[0]), []byte(s.clusterAuth)) != 1 {
			return unauthenticated("peer call with another cluster key than this node's (--cluster-key-file)")
		}
	}
	return nil
}

// nodeCertificate checks that the caller presented a node certificate: one
// the cluster CA signed (the TLS handshake verified the chain) with the
// serverAuth usage, which node certificates have and client certificates
// should not.
func nodeCertificate(ctx context.Context) error {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return unauthenticated("peer call without a TLS connection")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return unauthenticated("peer call without a node certificate: the Peer service needs a client certificate signed by the cluster CA (--tls-ca)")
	}
	leaf := ti.State.VerifiedChains[0][0]
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
		return permissionDenied("certificate %q is not a node certificate (it lacks the serverAuth usage): only nodes may call the Peer service",
			leaf.Subject.String())
	}
	return nil
}

// BearerToken returns the bearer token of a call ("" for none).
func BearerToken(ctx context.Context) string {
	for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
		if tok, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(tok)
		}
	}
	return ""
}

// checkToken authenticates a Cache call and returns the prefixes its token
// allows (nil: every namespace). Without a tokens file every call passes.
func (s *Credentials) checkToken(ctx context.Context) (allowed *tokenEntry, err error) {
	ts := s.tokens.Load()
	if ts == nil {
		return nil, nil
	}
	tok := BearerToken(ctx)
	if tok == "" {
		return nil, unauthenticated("call without a bearer token: this node requires one (--auth-tokens-file); set client.ConnConfig.Token, or kvring --token")
	}
	e := ts.find(tok)
	if e == nil {
		return nil, unauthenticated("bearer token not accepted by this node (not in --auth-tokens-file)")
	}
	return e, nil
}

// checkNamespace refuses a namespace the token's prefixes do not cover.
func checkNamespace(e *tokenEntry, namespace string) error {
	if e == nil || e.allows(namespace) {
		return nil
	}
	return permissionDenied("the token does not allow namespace %q (its prefixes: %s)", namespace, strings.Join(e.prefixes, ", "))
}

// unary authenticates unary calls.
func (s *Credentials) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	switch {
	case strings.HasPrefix(info.FullMethod, peerPrefix):
		if err := s.checkPeer(ctx); err != nil {
			return nil, err
		}
	case strings.HasPrefix(info.FullMethod, CachePrefix):
		e, err := s.checkToken(ctx)
		if err != nil {
			return nil, err
		}
		if namespace, ok := requestNamespace(req); ok {
			if err := checkNamespace(e, namespace); err != nil {
				return nil, err
			}
		}
	}
	return handler(ctx, req)
}

// stream authenticates streaming calls; a Cache stream's namespace is
// checked on its first message (Put's begin, Get's request).
func (s *Credentials) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	switch {
	case strings.HasPrefix(info.FullMethod, peerPrefix):
		if err := s.checkPeer(ss.Context()); err != nil {
			return err
		}
	case strings.HasPrefix(info.FullMethod, CachePrefix):
		e, err := s.checkToken(ss.Context())
		if err != nil {
			return err
		}
		if e != nil {
			stream := &namespaceStream{ServerStream: ss, token: e}
			err := handler(srv, stream)
			if stream.denied != nil {
				return stream.denied // whatever the handler made of it
			}
			return err
		}
	}
	return handler(srv, ss)
}

// namespaceStream checks the namespace of a stream's first message.
type namespaceStream struct {
	grpc.ServerStream
	token   *tokenEntry
	checked bool
	denied  error // the refusal of the first message, returned for the call
}

func (n *namespaceStream) RecvMsg(m any) error {
	if n.denied != nil {
		return n.denied
	}
	if err := n.ServerStream.RecvMsg(m); err != nil || n.checked {
		return err
	}
	n.checked = true
	namespace, _ := requestNamespace(m) // a first message without one names namespace ""
	n.denied = checkNamespace(n.token, namespace)
	return n.denied
}

// requestNamespace returns the namespace a Cache request names; ok is false
// for requests that name none (Topology, ReleaseLease).
func requestNamespace(req any) (string, bool) {
	switch r := req.(type) {
	case *kvringv1.RegisterNamespaceRequest:
		return r.GetName(), true
	case *kvringv1.LookupRequest:
		return r.GetNamespace().GetName(), true
	case *kvringv1.GetRequest:
		return r.GetNamespace().GetName(), true
	case *kvringv1.PutRequest:
		return r.GetBegin().GetNamespace().GetName(), true
	}
	return "", false
}

// tokenSet is a parsed tokens file, keyed by the tokens' SHA-256.
type tokenSet struct {
	byHash map[[32]byte]*tokenEntry
}

// tokenEntry is one token's grant: the namespace prefixes it may use.
type tokenEntry struct {
	prefixes []string // "*" allows every namespace
}

func (e *tokenEntry) allows(namespace string) bool {
	for _, p := range e.prefixes {
		if p == "*" || strings.HasPrefix(namespace, p) {
			return true
		}
	}
	return false
}

// find returns the entry of tok, or nil. It compares SHA-256 digests, so
// the time it takes says nothing about how much of a token matched.
func (t *tokenSet) find(tok string) *tokenEntry {
	return t.byHash[sha256.Sum256([]byte(tok))]
}

// parseTokens parses a tokens file. Each line that is not blank or a
// comment (#) is
//
//	TOKEN PREFIX[,PREFIX...]
//
// TOKEN is the bearer token itself (at least 16 characters), or
// sha256:HEX, the hex SHA-256 of the token, so the file need not hold the
// token. Each PREFIX allows the namespaces that start with it; * allows
// every namespace. A token listed twice is an error.
func parseTokens(b []byte, path string) (*tokenSet, error) {
	ts := &tokenSet{byHash: make(map[[32]byte]*tokenEntry)}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 2 {
			return nil, fmt.Errorf("tokens file %s: line %d: want TOKEN PREFIX[,PREFIX...] (two fields), got %d fields", path, line, len(f))
		}
		var h [32]byte
		if hx, ok := strings.CutPrefix(f[0], "sha256:"); ok {
			raw, err := hex.DecodeString(hx)
			if err != nil || len(raw) != 32 {
				return nil, fmt.Errorf("tokens file %s: line %d: sha256: wants 64 hex digits", path, line)
			}
			copy(h[:], raw)
		} else {
			if len(f[0]) < minTokenLen {
				return nil, fmt.Errorf("tokens file %s: line %d: token shorter than %d characters", path, line, minTokenLen)
			}
			h = sha256.Sum256([]byte(f[0]))
		}
		if ts.byHash[h] != nil {
			return nil, fmt.Errorf("tokens file %s: line %d: token listed twice", path, line)
		}
		var prefixes []string
		for p := range strings.SplitSeq(f[1], ",") {
			if p == "" {
				return nil, fmt.Errorf("tokens file %s: line %d: empty namespace prefix (use * for every namespace)", path, line)
			}
			prefixes = append(prefixes, p)
		}
		ts.byHash[h] = &tokenEntry{prefixes: prefixes}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read tokens file %s: %w", path, err)
	}
	return ts, nil
}

// reloadTokens reads the tokens file and the admin token again.
func (s *Credentials) reloadTokens() error {
	if s.cfg.AuthTokensFile != "" {
		b, err := os.ReadFile(s.cfg.AuthTokensFile)
		if err != nil {
			return fmt.Errorf("cannot read tokens file: %w", err)
		}
		ts, err := parseTokens(b, s.cfg.AuthTokensFile)
		if err != nil {
			return err
		}
		if len(ts.byHash) == 0 {
			s.log.Warn("the tokens file lists no token: every Cache call is refused", "file", s.cfg.AuthTokensFile)
		}
		s.tokens.Store(ts)
	}
	if s.cfg.AdminTokenFile != "" {
		tok, err := readSecret(s.cfg.AdminTokenFile, "admin token", minTokenLen)
		if err != nil {
			return err
		}
		if i := bytes.IndexByte(tok, '\n'); i >= 0 {
			tok = trimSpace(tok[:i])
		}
		h := sha256.Sum256(tok)
		s.adminToken.Store(&h)
	}
	return nil
}

// TokensRequired reports whether engines must present a token (a tokens
// file is configured). For the Redis-protocol port (respcoord.Credentials).
func (s *Credentials) TokensRequired() bool { return s.tokens.Load() != nil }

// HasAdminToken reports whether an admin token is configured.
func (s *Credentials) HasAdminToken() bool { return s.adminToken.Load() != nil }

// IsAdminToken reports whether token is the admin token, comparing SHA-256
// digests in constant time.
func (s *Credentials) IsAdminToken(token string) bool {
	want := s.adminToken.Load()
	if want == nil {
		return false
	}
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// EngineToken returns what an engine token allows; ok is false for a token
// the tokens file does not list, or without a tokens file.
func (s *Credentials) EngineToken(token string) (allows func(namespace string) bool, ok bool) {
	ts := s.tokens.Load()
	if ts == nil {
		return nil, false
	}
	e := ts.find(token)
	if e == nil {
		return nil, false
	}
	return e.allows, true
}

func trimSpace(b []byte) []byte { return bytes.TrimSpace(b) }
