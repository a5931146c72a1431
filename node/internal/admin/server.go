package admin

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"
)

// Handler serves the operator endpoints. Every reply is JSON; errors
// are {"error": "..."} with a matching status code: 404 for an unknown path,
// 405 (with Allow) for a known path and another method, 503 while the node
// cannot answer. Handlers never wait for the node's lifecycle lock, so they
// answer during shutdown.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metricsHandler)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rd := a.Readiness()
		if !rd.Ready {
			writeJSON(w, http.StatusServiceUnavailable, rd)
			return
		}
		writeJSON(w, http.StatusOK, rd)
	})
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		if !a.ready() {
			writeError(w, http.StatusServiceUnavailable, "node is not serving")
			return
		}
		writeJSON(w, http.StatusOK, a.stats())
	})
	mux.HandleFunc("GET /v1/cluster", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.Cluster())
	})
	mux.HandleFunc("GET /v1/version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.build)
	})
	mux.HandleFunc("GET /v1/handoff", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.mover.Status())
	})
	mux.HandleFunc("GET /v1/ring", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.RingInfo())
	})
	mux.HandleFunc("GET /v1/namespaces", func(w http.ResponseWriter, r *http.Request) {
		ns := a.Namespaces()
		if !a.adminAuthenticated() {
			hideFingerprints(ns)
		}
		writeJSON(w, http.StatusOK, map[string][]NamespaceInfo{"namespaces": ns})
	})
	mux.HandleFunc("GET /v1/namespaces/{name}/share", a.getShare)
	mux.HandleFunc("GET /v1/resp/locate", a.locateRESP)
	a.registerActions(mux)
	if a.pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return a.adminAuth(jsonNoRoute(mux))
}

// jsonNoRoute serves mux, turning its plain-text "404 page not found" and
// "405 method not allowed" answers into JSON errors (keeping the Allow
// header).
func jsonNoRoute(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		rec := &statusRecorder{header: make(http.Header), status: http.StatusOK}
		h.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusMethodNotAllowed:
			w.Header()["Allow"] = rec.header["Allow"]
			writeError(w, rec.status, "method "+r.Method+" not allowed on "+r.URL.Path+"; allowed: "+rec.header.Get("Allow"))
		case http.StatusNotFound:
			writeError(w, rec.status, "no such endpoint: "+r.Method+" "+r.URL.Path)
		default: // a redirect to the canonical path
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.status)
		}
	})
}

// statusRecorder keeps the status and headers a handler writes and drops
// its body.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(p []byte) (int, error) { return len(p), nil }
func (s *statusRecorder) WriteHeader(code int)        { s.status = code }

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
