package coord

import (
	"slices"

	"github.com/kvring/kvring/node/internal/namespace"
	"github.com/kvring/kvring/node/internal/owner"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// placement says where on the ring each chunk of a request goes: by its
// own id when the namespace places chunks one by one, by its group's key
// (the id of the first chunk of its placement group, sent by the client as
// runs) when the namespace groups them.
type placement struct {
	keys    [][]byte // ring key per request position; aliases the request
	group   []int    // group ordinal per request position, non-decreasing from 0
	n       int      // number of groups
	grouped bool     // the keys are group keys, to be sent on to the owners
}

// place resolves the placement keys of ids from the request's runs and
// checks them (namespace.ResolveGroups: runs are required exactly when the
// namespace groups chunks).
func place(rec *kvringv1.NamespaceRecord, ids [][]byte, runs []*kvringv1.GroupRun) (*placement, error) {
	g, err := namespace.ResolveGroups(rec, ids, runs, false)
	if err != nil {
		return nil, err
	}
	return &placement{keys: g.Keys, group: g.Of, n: g.N, grouped: g.Grouped}, nil
}

// readRequest is a read's (Lookup, Get) namespace, ids and placement,
// checked, with the ring they are placed on.
type readRequest struct {
	ns    string // store namespace
	rec   *kvringv1.NamespaceRecord
	ids   []store.ID
	place *placement
	ring  *ring.Ring
}

// resolveRead checks a read's namespace reference, ids (1 to MaxBatch, 32
// bytes each) and group runs, and takes the current ring.
func (c *Coordinator) resolveRead(ref *kvringv1.NamespaceRef, raw [][]byte, runs []*kvringv1.GroupRun) (*readRequest, error) {
	ns, rec, err := c.reg.Resolve(ref)
	if err != nil {
		return nil, err
	}
	ids, err := owner.ParseIDs(raw, c.cfg.MaxBatch)
	if err != nil {
		return nil, err
	}
	pl, err := place(rec, raw, runs)
	if err != nil {
		return nil, err
	}
	rg, err := c.currentRing()
	if err != nil {
		return nil, err
	}
	return &readRequest{ns: ns, rec: rec, ids: ids, place: pl, ring: rg}, nil
}

// waveEnd is the request position where the lookup wave that starts at
// position lo ends: it takes the next width groups.
func (p *placement) waveEnd(lo, width int) int {
	if lo >= len(p.keys) {
		return lo
	}
	last := p.group[lo] + width
	hi := lo
	for hi < len(p.keys) && p.group[hi] < last {
		hi++
	}
	return hi
}

// writeOwners returns the r owners a new chunk placed by key is written to:
// the first r members in the key's ring order that are not draining (a
// draining member keeps what it holds but takes no new chunks). Fewer than r
// when fewer members take chunks; none when every member drains.
func (c *Coordinator) writeOwners(rg *ring.Ring, ns string, key []byte, r int) []ring.Member {
	owners := rg.Owners(ns, key, r)
	if c.cfg.Draining == nil || !slices.ContainsFunc(owners, func(m ring.Member) bool { return c.cfg.Draining(m.ID) }) {
		return owners
	}
	out := make([]ring.Member, 0, r)
	for _, m := range rg.Owners(ns, key, rg.Len()) {
		if !c.cfg.Draining(m.ID) {
			out = append(out, m)
			if len(out) == r {
				break
			}
		}
	}
	return out
}

// Owners returns the members a chunk placed by key on rg belongs on now:
// its write owners (writeOwners). The hand-off moves chunks to them.
func (c *Coordinator) Owners(rg *ring.Ring, ns string, key []byte, r int) []ring.Member {
	return c.writeOwners(rg, ns, key, r)
}

// readOwners returns the members that may hold a chunk placed by key: its r
// owners and, while some of them drain or are known to be down, the members
// written to in their stead (writeOwners, substitute): the first members
// after them in ring order until r of the set neither drain nor are down.
func (c *Coordinator) readOwners(rg *ring.Ring, ns string, key []byte, r int) []ring.Member {
	return c.appendReadOwners(nil, rg, ns, key, r)
}

// appendReadOwners is readOwners appending to dst, so that a caller
// resolving many keys can reuse one buffer.
func (c *Coordinator) appendReadOwners(dst []ring.Member, rg *ring.Ring, ns string, key []byte, r int) []ring.Member {
	start := len(dst)
	if dst == nil {
		dst = rg.Owners(ns, key, r) // sized exactly
	} else {
		dst = rg.AppendOwners(dst, ns, key, r)
	}
	owners := dst[start:]
	unusable := func(m ring.Member) bool {
		return (c.cfg.Draining != nil && c.cfg.Draining(m.ID)) || c.peers.isDown(m.ID)
	}
	live := 0
	for _, m := range owners {
		if !unusable(m) {
			live++
		}
	}
	if live == len(owners) {
		return dst
	}
	for _, m := range rg.Owners(ns, key, rg.Len())[len(owners):] {
		if live >= r {
			break
		}
		if !unusable(m) {
			dst = append(dst, m)
			live++
		}
	}
	return dst
}
