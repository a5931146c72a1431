package admin

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/membership"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// The admin API's write actions act on this node only; the CLI fans a
// cluster-wide action (drop-namespace, namespaces set) out to every member. Each is allowed
// when an admin token is configured (and presented: adminAuth checks it) or
// when Config.AdminActions is set; it is logged once with who asked and
// counted in kvring_admin_actions_total.

// errActionsOff refuses a write action on a node that allows none.
var errActionsOff = errors.New("admin actions are off on this node: configure an admin token (--admin-token-file) or start it with --admin-actions")

// actionError is a refusal with its HTTP status.
type actionError struct {
	status int
	msg    string
}

func (e *actionError) Error() string { return e.msg }

func refuse(status int, format string, args ...any) error {
	return &actionError{status: status, msg: fmt.Sprintf(format, args...)}
}

// registerActions adds the write routes to mux.
func (a *API) registerActions(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/drain", a.action("drain", func(r *http.Request) (any, error) {
		return a.setDraining(r.Context(), true)
	}))
	mux.HandleFunc("POST /v1/undrain", a.action("undrain", func(r *http.Request) (any, error) {
		return a.setDraining(r.Context(), false)
	}))
	mux.HandleFunc("DELETE /v1/members/{id}", a.action("forget", func(r *http.Request) (any, error) {
		return a.forget(r.Context(), r.PathValue("id"), r.URL.Query().Get("force") == "true")
	}))
	mux.HandleFunc("DELETE /v1/namespaces/{name}", a.action("drop-namespace", func(r *http.Request) (any, error) {
		return a.DropNamespace(r.PathValue("name"))
	}))
	mux.HandleFunc("PUT /v1/namespaces/{name}/share", a.action("set-share", func(r *http.Request) (any, error) {
		return a.setShare(r, r.PathValue("name"))
	}))
	mux.HandleFunc("DELETE /v1/namespaces/{name}/chunks/{id}", a.action("evict", func(r *http.Request) (any, error) {
		return a.evictChunk(r.PathValue("name"), r.PathValue("id"))
	}))
}

// action wraps a write action: the permission check, one log line naming
// who asked, the metric, and a JSON answer.
func (a *API) action(name string, do func(r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		result, status := "ok", http.StatusOK
		var out any
		var err error
		switch {
		case !a.adminActions && !a.adminAuthenticated():
			err = refuse(http.StatusForbidden, "%s", errActionsOff.Error())
		default:
			out, err = do(r)
		}
		var ae *actionError
		switch {
		case errors.As(err, &ae):
			result, status = "refused", ae.status
		case err != nil:
			result, status = "error", http.StatusInternalServerError
		}
		a.m.AdminActions.WithLabelValues(name, result).Inc()
		a.log.Info("admin action", "action", name, "path", r.URL.Path, "remote", r.RemoteAddr, "result", result, "err", err)
		if err != nil {
			writeError(w, status, err.Error())
			return
		}
		writeJSON(w, status, out)
	}
}

// DrainState answers drain and undrain.
type DrainState struct {
	Node     string `json:"node"`
	Draining bool   `json:"draining"`
}

// setDraining announces the draining (or active) state: a draining node keeps
// what it holds and serves reads but takes no new chunks as an owner
// (writes go to the next owners), and reports not ready. Blocks for the
// gossip broadcast, bounded by ctx.
func (a *API) setDraining(ctx context.Context, on bool) (any, error) {
	if !a.ready() && !a.draining.Load() {
		return nil, refuse(http.StatusServiceUnavailable, "node is not serving")
	}
	state := membership.Active
	if on {
		state = membership.Draining
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.member.SetState(ctx, state); err != nil {
		return nil, fmt.Errorf("cannot announce the %s state: %w", state, err)
	}
	a.member.RebuildNow() // this node's own view follows at once
	a.draining.Store(on)
	a.mover.Kick() // draining: its chunks go to the next owners; undrained: they may come back
	return DrainState{Node: a.st.NodeID(), Draining: on}, nil
}

// Forgotten answers a forget.
type Forgotten struct {
	Node      string `json:"node"`
	Forgotten string `json:"forgotten"`
	RingEpoch uint64 `json:"ring_epoch"`
}

// forget removes member id from this node's ring at once. A member whose
// gRPC address still accepts connections is alive: refused unless force.
func (a *API) forget(ctx context.Context, id string, force bool) (any, error) {
	var target *membership.Member
	for _, m := range a.member.Members() {
		if m.ID == id {
			target = &m
		}
	}
	switch {
	case id == a.st.NodeID():
		return nil, refuse(http.StatusConflict, "member %s is this node: it cannot forget itself", id)
	case target == nil:
		return nil, refuse(http.StatusNotFound, "no member %s in this node's member table", id)
	case !force && answers(ctx, target.GRPCAddr):
		return nil, refuse(http.StatusConflict, "member %s answers at %s: it is alive; forget it anyway with force (kvring forget --force)", id, target.GRPCAddr)
	}
	if err := a.member.Forget(id); err != nil {
		return nil, err
	}
	return Forgotten{Node: a.st.NodeID(), Forgotten: id, RingEpoch: a.member.Ring().Epoch()}, nil
}

// answers reports whether addr accepts a TCP connection within a second.
func answers(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// DroppedNamespace is what dropping a namespace freed on this node.
type DroppedNamespace struct {
	Node      string `json:"node"`
	Namespace string `json:"namespace"`
	// Chunks and Bytes were freed at once (Bytes: their memory, slots
	// included); PinnedChunks go when their lookup leases end.
	Chunks       int64 `json:"chunks"`
	Bytes        int64 `json:"bytes"`
	PinnedChunks int64 `json:"pinned_chunks"`
}

// DropNamespace removes namespace name from this node: its registry record
// and every chunk of it the store holds (pinned ones when their pins end).
// Engines of the namespace then get FailedPrecondition ("not registered") on
// their next call here, and register again if they mean to. An unknown
// name is refused (404).
func (a *API) DropNamespace(name string) (DroppedNamespace, error) {
	out := DroppedNamespace{Node: a.st.NodeID(), Namespace: name}
	rec := a.reg.Get(name)
	if rec == nil {
		return out, refuse(http.StatusNotFound, "namespace %q is not registered on this node", name)
	}
	freed, _, err := a.owner.DropNamespace(&kvringv1.NamespaceRef{Name: name, Fingerprint: rec.GetFingerprint()})
	if err != nil {
		return out, err
	}
	// Its share goes with it: a namespace registered again under the name
	// starts without one.
	if err := a.st.SetShare(namespace.StoreName(name, rec.GetFingerprint()), store.Share{}); err != nil {
		a.log.Warn("cannot remove the share of a dropped namespace", "namespace", name, "err", err)
	}
	out.Chunks, out.Bytes, out.PinnedChunks = freed.Chunks, freed.SlotBytes, freed.Pinned
	return out, nil
}

// evictChunk removes one chunk of a registered namespace from this node.
func (a *API) evictChunk(name, hexID string) (any, error) {
	rec := a.reg.Get(name)
	if rec == nil {
		return nil, refuse(http.StatusNotFound, "namespace %q is not registered on this node", name)
	}
	raw, err := hex.DecodeString(hexID)
	if err != nil || len(raw) != len(store.ID{}) {
		return nil, refuse(http.StatusBadRequest, "chunk id %q: want 64 hex characters", hexID)
	}
	id := store.ID(raw)
	switch err := a.st.Evict(namespace.StoreName(name, rec.GetFingerprint()), id); {
	case errors.Is(err, store.ErrNotFound):
		return nil, refuse(http.StatusNotFound, "chunk %s of namespace %q is not held on this node", hexID, name)
	case errors.Is(err, store.ErrBusy):
		return nil, refuse(http.StatusConflict, "chunk %s is pinned by a lookup lease; try again when it ends", hexID)
	case err != nil:
		return nil, err
	}
	return map[string]string{"node": a.st.NodeID(), "namespace": name, "evicted": hexID}, nil
}

// SetDraining announces the draining (or active) state as POST /v1/drain
// (and /v1/undrain) do; the node's Leave calls it. A node that does not
// serve is refused with an error NotServing reports. Blocks for the gossip
// broadcast, bounded by ctx.
func (a *API) SetDraining(ctx context.Context, on bool) error {
	_, err := a.setDraining(ctx, on)
	return err
}

// NotServing reports whether err is SetDraining's refusal of a node that
// does not serve.
func NotServing(err error) bool {
	var ae *actionError
	return errors.As(err, &ae) && ae.status == http.StatusServiceUnavailable
}
