package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/kvring/kvring/node/internal/namespace"
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

// setShare sets the share of a registered namespace on this node from the
// request's JSON body (a store.Share; {} removes it). The share is kept in
// the store's catalog, so a restart keeps it; it is this node's alone (the
// CLI sets it on every alive member). An unknown namespace is 404, a share
// the store refuses (guarantees over the limit, a guarantee above the cap,
// a policy other than lru) 400.
func (n *Node) setShare(r *http.Request, name string) (any, error) {
	p := n.parts.Load()
	rec := p.svc.reg.Get(name)
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
	if err := p.store.SetShare(sn, sh); err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return nil, refuse(http.StatusBadRequest, "%v", err)
		}
		return nil, fmt.Errorf("cannot set the share of namespace %q: %w", name, err)
	}
	st := p.store.NamespaceStats()[sn]
	return NamespaceShare{Node: p.store.NodeID(), Namespace: name, Share: sh, LimitBytes: p.store.Limit(),
		GuaranteeBytes: st.GuaranteeBytes, CapBytes: st.CapBytes, Bytes: st.Bytes}, nil
}
