package node

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/resp"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
)

// maxLocateKeys bounds the keys of one locate request.
const maxLocateKeys = 256

// RESPKeyLocation is where a Redis-protocol key lives (GET
// /v1/resp/locate): how the port maps it and which members hold it now.
type RESPKeyLocation struct {
	Key       string `json:"key"`
	Namespace string `json:"namespace"`
	// ID is the chunk id (64 hex digits): SHA-256 of the key.
	ID string `json:"id"`
	// Slot is the key's Redis Cluster hash slot; PlaceSlot the slot whose
	// owners hold it in Redis Cluster mode (a metadata key's is its
	// kv_bytes key's slot).
	Slot      uint16 `json:"slot"`
	PlaceSlot uint16 `json:"place_slot"`
	// Owners are the key's write owners on this node's ring (primary
	// first); empty when its namespace is not registered.
	Owners []string `json:"owners"`
	// Holders are the ring members that hold the key sealed now (sorted).
	Holders []string `json:"holders"`
	// Unanswered names the members that could not be asked, with why:
	// they may hold the key too.
	Unanswered map[string]string `json:"unanswered,omitempty"`
	// NotRegistered: the key's namespace does not exist (nothing was
	// written to it), so no member holds the key.
	NotRegistered bool `json:"not_registered,omitempty"`
}

// RESPLocation answers GET /v1/resp/locate.
type RESPLocation struct {
	Node        string            `json:"node"`
	ClusterMode bool              `json:"cluster_mode"`
	RingEpoch   uint64            `json:"ring_epoch"`
	Keys        []RESPKeyLocation `json:"keys"`
}

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
		out.Keys[i] = n.locateKey(r.Context(), p, rg, p.resp.KeyOf([]byte(k)))
	}
	writeJSON(w, http.StatusOK, out)
}

// locateKey is where k lives on rg: its owners, and every member asked
// whether it holds k (in parallel, each bounded by the peer timeout).
func (n *Node) locateKey(ctx context.Context, p *nodeParts, rg *ring.Ring, k resp.Key) RESPKeyLocation {
	loc := RESPKeyLocation{Key: k.Name, Namespace: k.Namespace, ID: hex.EncodeToString(k.ID[:]), Slot: k.Slot,
		PlaceSlot: k.PlaceSlot, Owners: []string{}, Holders: []string{}}
	rec := p.svc.reg.Get(k.Namespace)
	if rec == nil {
		loc.NotRegistered = true
		return loc
	}
	for _, m := range p.svc.coord.Owners(rg, rec.GetName(), k.Place[:], max(1, int(rec.GetReplicationFactor()))) {
		loc.Owners = append(loc.Owners, m.ID)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range rg.Members() {
		wg.Go(func() {
			held, err := n.holds(ctx, p, m, rec, k)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if loc.Unanswered == nil {
					loc.Unanswered = map[string]string{}
				}
				loc.Unanswered[m.ID] = err.Error()
			case held:
				loc.Holders = append(loc.Holders, m.ID)
			}
		})
	}
	wg.Wait()
	slices.Sort(loc.Holders)
	return loc
}

// holds reports whether member m holds k sealed now: this node's store,
// or m asked with Peer.Has (no pin).
func (n *Node) holds(ctx context.Context, p *nodeParts, m ring.Member, rec *kvringv1.NamespaceRecord, k resp.Key) (bool, error) {
	if m.ID == p.store.NodeID() {
		return p.store.Contains(namespace.StoreName(rec.GetName(), rec.GetFingerprint()), k.ID), nil
	}
	held, _, err := p.svc.coord.Has(ctx, m, rec, [][]byte{k.ID[:]}, nil)
	if err != nil {
		return false, err
	}
	return held[0], nil
}
