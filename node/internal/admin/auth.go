package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// openAdminPaths are served without the admin token: probes and Prometheus
// need them, and they say nothing an attacker could use (counts, states).
var openAdminPaths = map[string]bool{"/metrics": true, "/healthz": true, "/readyz": true}

// adminAuth wraps the admin handler: with an admin token configured, every
// path but openAdminPaths needs "Authorization: Bearer <token>". A request
// without one gets 401 (with WWW-Authenticate), one with another token 403;
// both JSON errors naming what was missing.
func (a *API) adminAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openAdminPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		want := a.adminTokenHash()
		if want == nil {
			next.ServeHTTP(w, r)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || strings.TrimSpace(tok) == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kvring admin"`)
			writeError(w, http.StatusUnauthorized, "this endpoint needs the admin token: send Authorization: Bearer <token> (kvring --admin-token)")
			return
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			writeError(w, http.StatusForbidden, "the admin token is not this node's (--admin-token-file)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// adminTokenHash is the SHA-256 of the admin token, or nil when none is
// configured.
func (a *API) adminTokenHash() *[32]byte {
	if a.sec != nil {
		return a.sec.AdminTokenHash()
	}
	return nil
}

// adminAuthenticated reports whether r reached a handler with the admin
// token: true only when one is configured, since adminAuth lets no request
// without it through.
func (a *API) adminAuthenticated() bool { return a.adminTokenHash() != nil }

// hideFingerprints blanks the fingerprints of ns, for callers without the
// admin token.
func hideFingerprints(ns []NamespaceInfo) {
	for i := range ns {
		ns[i].Fingerprint = ""
	}
}
