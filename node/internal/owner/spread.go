package owner

import (
	"time"

	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/spread"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
)

// Lookup is Has for a lookup: it also counts the lookup per group for the
// node's hot-group finder (Config.Counter) and returns, per run of runs
// (the ids' placement keys; empty when the namespace places chunks by their
// ids), the group's spread width as this node knows it (Config.Spread; 0:
// not spread). Runs that do not cover the ids exactly are ignored, as from
// a coordinator that predates them: they count nothing and get no widths.
func (o *Owner) Lookup(client string, ref *kvringv1.NamespaceRef, rawIDs [][]byte, runs []*kvringv1.GroupRun, pin *kvringv1.LeasePin) ([]bool, time.Duration, []uint32, error) {
	return o.LookupFrom("", client, ref, rawIDs, runs, pin)
}

// LookupFrom is Lookup for a coordinator of another node, whose node id is
// coord: the pins of its lease end when it is gone (CoordinatorGone).
func (o *Owner) LookupFrom(coord, client string, ref *kvringv1.NamespaceRef, rawIDs [][]byte, runs []*kvringv1.GroupRun, pin *kvringv1.LeasePin) ([]bool, time.Duration, []uint32, error) {
	held, ttl, err := o.hasFrom(coord, client, ref, rawIDs, pin)
	if err != nil || len(runs) == 0 {
		return held, ttl, nil, err
	}
	keys := runKeys(runs, len(rawIDs))
	if keys == nil {
		return held, ttl, nil, nil
	}
	ns := namespace.StoreName(ref.GetName(), ref.GetFingerprint())
	o.cfg.Counter.Asked(ns, rawIDs, keys)
	if o.cfg.Spread == nil {
		return held, ttl, nil, nil
	}
	widths := make([]uint32, len(runs))
	for i, r := range runs {
		widths[i] = uint32(o.cfg.Spread.Width(spread.Key{NS: ns, Place: store.ID(r.GetKey())}))
	}
	return held, ttl, widths, nil
}

// runKeys expands runs to one key per id, or nil when they do not cover n
// ids exactly or a key is not 32 bytes.
func runKeys(runs []*kvringv1.GroupRun, n int) [][]byte {
	keys := make([][]byte, 0, n)
	for _, r := range runs {
		if len(r.GetKey()) != len(store.ID{}) || int(r.GetCount()) > n-len(keys) {
			return nil
		}
		for range r.GetCount() {
			keys = append(keys, r.GetKey())
		}
	}
	if len(keys) != n {
		return nil
	}
	return keys
}

// holdSpread records that this node keeps the groups of a spreading
// prepare (PrepareBegin.spread_width) as spread copies for ttl (at most
// spread.MaxTTL).
func (o *Owner) holdSpread(ref *kvringv1.NamespaceRef, runs []*kvringv1.GroupRun, width uint32, ttl time.Duration) {
	if o.cfg.Spread == nil || width <= 1 || ttl <= 0 {
		return
	}
	ns := namespace.StoreName(ref.GetName(), ref.GetFingerprint())
	until := o.cfg.Now().Add(min(ttl, spread.MaxTTL))
	for _, r := range runs {
		if len(r.GetKey()) == len(store.ID{}) {
			o.cfg.Spread.Hold(spread.Key{NS: ns, Place: store.ID(r.GetKey())}, int(width), until)
		}
	}
}
