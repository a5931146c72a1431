package node

import (
	"fmt"
	"net/http"

	"github.com/kvring/kvring/node/internal/resp/respcoord"
)

// RESPKeyLocation is where a Redis-protocol key lives (GET
// /v1/resp/locate): how the port maps it and which members hold it now
// (respcoord.KeyLocation).
type RESPKeyLocation = respcoord.KeyLocation

// RESPLocation answers GET /v1/resp/locate (respcoord.Location).
type RESPLocation = respcoord.Location

// maxLocateKeys bounds the keys of one locate request.
const maxLocateKeys = 256

// locateRESP serves GET /v1/resp/locate?key=K[&key=K2...]: for each key,
// its namespace, chunk id, slots, owners and the members that hold it now
// (this node from its store, the others asked with Peer.Has, no pin).
func (n *Node) locateRESP(w http.ResponseWriter, r *http.Request) {
	p := n.parts.Load()
	switch {
	case p == nil || !n.Ready():
		writeError(w, http.StatusServiceUnavailable, "node is not serving")
		return
	case p.resp == nil:
		writeError(w, http.StatusNotFound, "the Redis-protocol port is off on this node (kvring serve --resp-addr)")
		return
	}
	keys := r.URL.Query()["key"]
	if len(keys) == 0 || len(keys) > maxLocateKeys {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("want 1 to %d key parameters (?key=K&key=K2), got %d", maxLocateKeys, len(keys)))
		return
	}
	rg := p.member.Ring()
	if rg == nil || rg.Len() == 0 {
		writeError(w, http.StatusServiceUnavailable, "node has no ring yet")
		return
	}
	out := RESPLocation{Node: p.store.NodeID(), ClusterMode: n.cfg.RESP.ClusterMode, RingEpoch: rg.Epoch(),
		Keys: make([]RESPKeyLocation, len(keys))}
	for i, k := range keys {
		out.Keys[i] = p.respCluster.Locate(r.Context(), rg, p.resp.KeyOf([]byte(k)))
	}
	writeJSON(w, http.StatusOK, out)
}
