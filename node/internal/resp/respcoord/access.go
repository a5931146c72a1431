package respcoord

import "github.com/kvring/kvring/node/internal/resp"

// Credentials are the node's engine tokens (--auth-tokens-file) and admin
// token, as the port's AUTH checks them. Safe for concurrent use; no method
// blocks (a reload swaps what they read).
type Credentials interface {
	// TokensRequired reports whether engines must present a token (a
	// tokens file is configured).
	TokensRequired() bool
	// HasAdminToken reports whether an admin token is configured.
	HasAdminToken() bool
	// IsAdminToken reports whether token is the admin token, in time that
	// says nothing about how much of it matched.
	IsAdminToken(token string) bool
	// EngineToken returns what an engine token allows: whether it covers
	// a namespace; ok is false for a token not accepted (or no tokens
	// file).
	EngineToken(token string) (allows func(namespace string) bool, ok bool)
}

// respAccess is the node's side of the RESP server's authentication: the
// engine tokens of --auth-tokens-file (their namespace prefixes apply) and
// the admin token (every namespace, and FLUSHDB).
type respAccess struct {
	creds        Credentials
	adminActions bool
}

// anonymous: AUTH is required where the gRPC port requires a bearer token
// (engine tokens configured); an admin token alone protects the admin
// rights (FLUSHDB), which a client then gains with AUTH.
func (a respAccess) anonymous() (resp.Access, bool) {
	required := a.creds.TokensRequired()
	return resp.Access{Admin: a.adminActions && !a.creds.HasAdminToken()}, required
}

func (a respAccess) authenticate(token string) (resp.Access, error) {
	if a.creds.IsAdminToken(token) {
		return resp.Access{Admin: true, Name: "admin"}, nil
	}
	allows, ok := a.creds.EngineToken(token)
	if !ok {
		return resp.Access{}, resp.ErrBadToken
	}
	return resp.Access{Allows: allows, Name: "engine"}, nil
}
