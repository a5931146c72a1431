package coord

import (
	"slices"
	"time"

	"github.com/kvring/kvring/internal/choice"
	"github.com/kvring/kvring/node/internal/spread"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
	"github.com/kvring/kvring/store"
)

// Hot groups (package spread): a group its primary owner spread is held by
// the members of its key's spread set (ring.SpreadSet: width members, the
// primary first) and by its other owners. A read of such a group asks one
// of them, the less loaded of two picked at random per call (by the load
// each member answered lately; this node itself when it is an owner or
// holds copies: answered in process), and the owners for what that member
// lacks: the spread copies take the group's load off its owners without
// ever deciding what counts as held.

// hintTTL is how long a coordinator believes a holder's report that a group
// is spread: short, so that a group that cooled down is read from its
// owners again soon.
const hintTTL = 15 * time.Second

// spreadPick is where one read of a spread group goes first: member m, one
// of set (the group's spread members).
type spreadPick struct {
	m   ring.Member
	set []ring.Member
	ok  bool // the group is spread and m may be asked
}

// spreadPicks picks, once per group key and call, the member a read of a
// spread group asks first. Not safe for concurrent use (one per call).
type spreadPicks struct {
	c        *Coordinator
	rg       *ring.Ring
	name     string // namespace name (the ring key's namespace)
	store    string // store name (the spread records' namespace)
	replicas int
	picks    map[string]spreadPick // made on first use
}

// newSpreadPicks returns the picks of one read; nil (no spreading) when the
// node keeps no spread records or the namespace places chunks by their ids.
func (c *Coordinator) newSpreadPicks(rg *ring.Ring, rec *kvringv1.NamespaceRecord, storeNS string, grouped bool) *spreadPicks {
	if c.cfg.Spread == nil || !grouped {
		return nil
	}
	replicas, _ := replication(rec)
	return &spreadPicks{c: c, rg: rg, name: rec.GetName(), store: storeNS, replicas: replicas}
}

// of returns the pick for group key (ok false: read the owners as usual).
func (p *spreadPicks) of(key []byte) spreadPick {
	if p == nil || len(key) != len(store.ID{}) {
		return spreadPick{}
	}
	if pk, seen := p.picks[string(key)]; seen {
		return pk
	}
	pk := p.pick(key)
	if p.picks == nil {
		p.picks = map[string]spreadPick{}
	}
	p.picks[string(key)] = pk
	return pk
}

func (p *spreadPicks) pick(key []byte) spreadPick {
	k := spread.Key{NS: p.store, Place: store.ID(key)}
	width := min(p.c.cfg.Spread.Width(k), p.rg.Len())
	if width <= p.replicas {
		return spreadPick{}
	}
	set := p.rg.SpreadSet(p.name, key, width)
	isSelf := func(m ring.Member) bool { return m.ID == p.c.cfg.Self }
	if self := slices.IndexFunc(set, isSelf); self >= 0 && (self == 0 || p.c.cfg.Spread.Holds(k)) {
		return spreadPick{m: set[self], set: set, ok: true} // answered in process
	}
	if owners := p.rg.Owners(p.name, key, p.replicas); slices.ContainsFunc(owners, isSelf) {
		return spreadPick{m: owners[slices.IndexFunc(owners, isSelf)], set: set, ok: true}
	}
	m := set[choice.TwoChoices(len(set), func(i int) uint32 { return p.c.loadOf(set[i].ID) })]
	if p.c.peers.isDown(m.ID) || (p.c.cfg.Draining != nil && p.c.cfg.Draining(m.ID)) {
		return spreadPick{}
	}
	return spreadPick{m: m, set: set, ok: true}
}

// loadOf is member id's load as this node knows it: its own meter, or the
// hint id answered lately.
func (c *Coordinator) loadOf(id string) uint32 {
	if id == c.cfg.Self {
		return c.cfg.Load.Rate()
	}
	return c.cfg.Loads.Of(id)
}

// learnSpread records the spread widths member from answered for runs of
// namespace name. A width above 1 is believed from any member; "not
// spread" ends what this node knows only from a member that knows the
// group (spreadAuthority): a member asked because its hand-off summary
// names the group's partition knows nothing of a spread it takes no part
// in, and its 0 would make this node (and the engines it answers) read a
// hot group from its owners alone, or, on a holder, let the hand-off evict
// the copies it keeps.
func (c *Coordinator) learnSpread(from ring.Member, name, storeNS string, runs []*kvringv1.GroupRun, widths []uint32) {
	if c.cfg.Spread == nil || len(widths) != len(runs) {
		return
	}
	until := c.cfg.Now().Add(hintTTL)
	for i, r := range runs {
		if len(r.GetKey()) != len(store.ID{}) {
			continue
		}
		k := spread.Key{NS: storeNS, Place: store.ID(r.GetKey())}
		if widths[i] <= 1 && !c.spreadAuthority(from, name, r.GetKey(), k) {
			continue
		}
		c.cfg.Spread.Hint(k, int(widths[i]), until)
	}
}

// spreadAuthority reports whether member from knows whether group k (key
// of namespace name), which this node knows spread, still is: it is a
// member of the group's spread set (its primary owner spreads it, the
// others keep its copies). False when this node knows of no spread.
func (c *Coordinator) spreadAuthority(from ring.Member, name string, key []byte, k spread.Key) bool {
	width := c.cfg.Spread.Width(k)
	rg := c.cfg.Ring()
	if width <= 1 || rg == nil || rg.Len() == 0 {
		return false
	}
	return slices.ContainsFunc(rg.SpreadSet(name, key, width), func(m ring.Member) bool { return m.ID == from.ID })
}

// spreadWidths returns, per run of a read request, the group's spread width
// as this node knows it now, for the runs whose first chunk is before
// position end; nil when no group is spread.
func (c *Coordinator) spreadWidths(storeNS string, runs []*kvringv1.GroupRun, end int) []uint32 {
	if c.cfg.Spread == nil || len(runs) == 0 {
		return nil
	}
	var out []uint32
	pos := 0
	for i, r := range runs {
		if pos >= end {
			break
		}
		if w := c.cfg.Spread.Width(spread.Key{NS: storeNS, Place: store.ID(r.GetKey())}); w > 1 && len(r.GetKey()) == len(store.ID{}) {
			if out == nil {
				out = make([]uint32, len(runs))
			}
			out[i] = uint32(w)
		}
		pos += int(r.GetCount())
	}
	return out
}

// withoutMember returns members without m (a new slice).
func withoutMember(members []ring.Member, m ring.Member) []ring.Member {
	out := make([]ring.Member, 0, len(members))
	for _, o := range members {
		if o.ID != m.ID {
			out = append(out, o)
		}
	}
	return out
}
