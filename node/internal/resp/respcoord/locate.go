package respcoord

import (
	"context"
	"encoding/hex"
	"slices"
	"sync"

	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/resp"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
)

// KeyLocation is where a Redis-protocol key lives (GET
// /v1/resp/locate): how the port maps it and which members hold it now.
type KeyLocation struct {
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

// Location answers GET /v1/resp/locate.
type Location struct {
	Node        string        `json:"node"`
	ClusterMode bool          `json:"cluster_mode"`
	RingEpoch   uint64        `json:"ring_epoch"`
	Keys        []KeyLocation `json:"keys"`
}

// Locate is where k lives on rg: its owners, and every member asked
// whether it holds k (in parallel, each bounded by the peer timeout).
// Blocks on those members.
func (r *Cluster) Locate(ctx context.Context, rg *ring.Ring, k resp.Key) KeyLocation {
	loc := KeyLocation{Key: k.Name, Namespace: k.Namespace, ID: hex.EncodeToString(k.ID[:]), Slot: k.Slot,
		PlaceSlot: k.PlaceSlot, Owners: []string{}, Holders: []string{}}
	rec := r.reg.Get(k.Namespace)
	if rec == nil {
		loc.NotRegistered = true
		return loc
	}
	for _, m := range r.coord.Owners(rg, rec.GetName(), k.Place[:], max(1, int(rec.GetReplicationFactor()))) {
		loc.Owners = append(loc.Owners, m.ID)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range rg.Members() {
		wg.Go(func() {
			held, err := r.holds(ctx, m, rec, k)
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
func (r *Cluster) holds(ctx context.Context, m ring.Member, rec *kvringv1.NamespaceRecord, k resp.Key) (bool, error) {
	if m.ID == r.self {
		return r.st.Contains(namespace.StoreName(rec.GetName(), rec.GetFingerprint()), k.ID), nil
	}
	held, _, err := r.coord.Has(ctx, m, rec, [][]byte{k.ID[:]}, nil)
	if err != nil {
		return false, err
	}
	return held[0], nil
}
