package admin

import (
	"fmt"
	"net/http"

	"github.com/kvring/kvring/node/internal/resp/respcoord"
)

// maxLocateKeys bounds the keys of one locate request.
const maxLocateKeys = 256

// locateRESP serves GET /v1/resp/locate?key=K[&key=K2...]: for each key,
// its namespace, chunk id, slots, owners and the members that hold it now
// (this node from its store, the others asked with Peer.Has, no pin).
func (a *API) locateRESP(w http.ResponseWriter, r *http.Request) {
	switch {
	case !a.ready():
		writeError(w, http.StatusServiceUnavailable, "node is not serving")
		return
	case a.resp == nil:
		writeError(w, http.StatusNotFound, "the Redis-protocol port is off on this node (kvring serve --resp-addr)")
		return
	}
	keys := r.URL.Query()["key"]
	if len(keys) == 0 || len(keys) > maxLocateKeys {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("want 1 to %d key parameters (?key=K&key=K2), got %d", maxLocateKeys, len(keys)))
		return
	}
	rg := a.member.Ring()
	if rg == nil || rg.Len() == 0 {
		writeError(w, http.StatusServiceUnavailable, "node has no ring yet")
		return
	}
	out := respcoord.Location{Node: a.st.NodeID(), ClusterMode: a.respClusterMode, RingEpoch: rg.Epoch(),
		Keys: make([]respcoord.KeyLocation, len(keys))}
	for i, k := range keys {
		out.Keys[i] = a.respCluster.Locate(r.Context(), rg, a.resp.KeyOf([]byte(k)))
	}
	writeJSON(w, http.StatusOK, out)
}
