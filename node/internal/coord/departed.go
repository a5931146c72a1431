package coord

import (
	"slices"
	"sync"
	"time"

	"github.com/kvring/kvring/ring"
)

// departures remembers the members that left the ring lately (died, left
// or were forgotten), each with the last ring it was in, so that a read that
// finds a chunk nowhere can name the owner it could not ask: most likely the
// holder. Safe for concurrent use; it never blocks for long.
type departures struct {
	mu sync.Mutex
	m  map[string]departure
	// recorded is the last ring ringChanged was told of (nil before the
	// first change): a read placed on another ring (newer: published before
	// RingChanged ran; older: placed before it) may miss owners that
	// departures does not name, and unrecorded names them.
	recorded *ring.Ring
}

// departure is one member that left the ring.
type departure struct {
	member ring.Member
	last   *ring.Ring // the last ring it was a member of
	at     time.Time  // when it left
	died   bool       // declared dead rather than drained (Config.Died)
}

// Departures are remembered this long (as members stay listed after they
// die), and at most maxDepartures of them, the latest.
const (
	departureRetention = 10 * time.Minute
	maxDepartures      = 16
)

// ringChanged records the members of old that are not in next as departed
// at now, and forgets those that are back or left too long ago.
func (d *departures) ringChanged(old, next *ring.Ring, now time.Time, died func(id string) bool) {
	in := func(r *ring.Ring, id string) bool {
		return r != nil && slices.ContainsFunc(r.Members(), func(m ring.Member) bool { return m.ID == id })
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]departure{}
	}
	for id, dp := range d.m {
		if in(next, id) || now.Sub(dp.at) > departureRetention {
			delete(d.m, id)
		}
	}
	if next != nil && (d.recorded == nil || next.Epoch() > d.recorded.Epoch()) {
		d.recorded = next
	}
	if old == nil {
		return
	}
	for _, m := range old.Members() {
		if !in(next, m.ID) {
			d.m[m.ID] = departure{member: m, last: old, at: now, died: died != nil && died(m.ID)}
		}
	}
	for len(d.m) > maxDepartures {
		oldest := ""
		for id, dp := range d.m {
			if oldest == "" || dp.at.Before(d.m[oldest].at) {
				oldest = id
			}
		}
		delete(d.m, oldest)
	}
}

// owners returns the departed members that were among the r owners of a
// chunk of namespace ns placed by key in the last ring each was in, with how
// long ago each left, oldest departure last.
func (d *departures) owners(ns string, key []byte, r int, now time.Time) []departedOwner {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []departedOwner
	for _, dp := range d.m {
		if now.Sub(dp.at) > departureRetention {
			continue
		}
		if slices.ContainsFunc(dp.last.Owners(ns, key, r), func(m ring.Member) bool { return m.ID == dp.member.ID }) {
			out = append(out, departedOwner{ID: dp.member.ID, Ago: now.Sub(dp.at), Died: dp.died})
		}
	}
	slices.SortFunc(out, func(a, b departedOwner) int { return int(a.Ago - b.Ago) })
	return out
}

// unrecorded returns the owners of a chunk (namespace ns, placement key
// key, r replicas) in the last recorded ring that are not members of rg,
// when rg is another ring: members a read placed on rg did not ask, and
// that departures does not name for it. A newer rg dropped them in a change
// whose departures are not recorded yet (the window between a ring's
// publication and RingChanged); an older rg predates their return, and a
// member that came back is no longer remembered as departed. Either way
// they may hold the chunk. Nil when rg is the last recorded ring.
func (d *departures) unrecorded(rg *ring.Ring, ns string, key []byte, r int) []string {
	d.mu.Lock()
	last := d.recorded
	d.mu.Unlock()
	if last == nil || rg == nil || rg.Epoch() == last.Epoch() {
		return nil
	}
	var out []string
	for _, m := range last.Owners(ns, key, r) {
		if !slices.ContainsFunc(rg.Members(), func(x ring.Member) bool { return x.ID == m.ID }) {
			out = append(out, m.ID)
		}
	}
	return out
}

// departedOwner is an owner of a chunk that left the ring Ago ago.
type departedOwner struct {
	ID   string
	Ago  time.Duration
	Died bool // declared dead: it may come back with the chunk
}
