package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/kvring/kvring/node/internal/namespace"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// maxShareBody bounds the body of PUT /v1/namespaces/{name}/share.
const maxShareBody = 4 << 10

// NamespaceShare answers PUT /v1/namespaces/{name}/share: the share now in
// force for the namespace on this node, in bytes of its memory limit too,
// and what the namespace holds there.
type NamespaceShare struct {
	Node           string      `json:"node"`
	Namespace      string      `json:"namespace"`
	Share          store.Share `json:"share"`
	LimitBytes     int64       `json:"limit_bytes"`
	GuaranteeBytes int64       `json:"guarantee_bytes"`
	CapBytes       int64       `json:"cap_bytes"`
	Bytes          int64       `json:"bytes"`
}

// setShare sets the share of a registered namespace from the request's
// JSON body (a store.Share; {} removes it): on this node's store at once,
// and in the namespace's record, which it offers to every other member
// (within the broadcast bound) when the bounds changed. The record carries
// the share to members that join later and across restarts. An unknown
// namespace is 404, a share the store refuses (guarantees over the limit, a
// guarantee above the cap, a policy other than lru) 400. Blocks on the
// offers.
func (a *API) setShare(r *http.Request, name string) (any, error) {
	rec := a.reg.Get(name)
	if rec == nil {
		return nil, refuse(http.StatusNotFound, "namespace %q is not registered on this node", name)
	}
	var sh store.Share
	dec := json.NewDecoder(io.LimitReader(r.Body, maxShareBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sh); err != nil {
		return nil, refuse(http.StatusBadRequest, "cannot read the share: %v (want {\"guarantee\": {\"bytes\": N} or {\"percent\": P}, \"cap\": ...})", err)
	}
	sn := namespace.StoreName(name, rec.GetFingerprint())
	if err := a.st.SetShare(sn, sh); err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return nil, refuse(http.StatusBadRequest, "%v", err)
		}
		return nil, fmt.Errorf("cannot set the share of namespace %q: %w", name, err)
	}
	// The record carries the share to the other members, and to those that
	// join later (they sync the records).
	set := shareToProto(sh, a.now(), a.st.NodeID())
	if rec, changed, err := a.reg.SetShare(name, set); err != nil {
		return nil, fmt.Errorf("cannot record the share of namespace %q: %w", name, err)
	} else if changed {
		a.coord.OfferNamespace(r.Context(), rec)
	}
	return a.shareInForce(name, sn), nil
}

// shareInForce is the share namespace name (store name sn) has on this
// node's store now, with what it holds there.
func (a *API) shareInForce(name, sn string) NamespaceShare {
	st := a.st.NamespaceStats()[sn]
	return NamespaceShare{Node: a.st.NodeID(), Namespace: name, Share: st.Share, LimitBytes: a.st.Limit(),
		GuaranteeBytes: st.GuaranteeBytes, CapBytes: st.CapBytes, Bytes: st.Bytes}
}

// getShare answers GET /v1/namespaces/{name}/share: the share this node
// enforces for a registered namespace (set here, or learnt with its record
// from another member), or 404.
func (a *API) getShare(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	rec := a.reg.Get(name)
	if rec == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("namespace %q is not registered on this node", name))
		return
	}
	writeJSON(w, http.StatusOK, a.shareInForce(name, namespace.StoreName(name, rec.GetFingerprint())))
}

// shareToProto is sh as a namespace record carries it, set at now by node.
func shareToProto(sh store.Share, now time.Time, node string) *kvringv1.NamespaceShare {
	amount := func(a store.Amount) *kvringv1.ShareAmount {
		if a.IsZero() {
			return nil
		}
		return &kvringv1.ShareAmount{Bytes: uint64(max(a.Bytes, 0)), Percent: a.Percent}
	}
	return &kvringv1.NamespaceShare{Guarantee: amount(sh.Guarantee), Cap: amount(sh.Cap), SetUnixMs: now.UnixMilli(), SetBy: node}
}
