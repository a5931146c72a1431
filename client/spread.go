package client

import (
	"sync"
	"time"

	"github.com/kvring/kvring/internal/choice"
	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/ring"
)

// Hot groups: a node that finds a placement group hot copies it to the
// members of the group key's spread set (ring.SpreadSet) and lookups report
// how wide a group is spread (LookupResponse.spread_width). The client
// remembers that for a short while and sends lookups and gets of a spread
// group to a member of its spread set instead of always to its primary
// owner: the less loaded of two members drawn at random per call, by the
// load figure each node's lookup answers carry (LookupResponse.load). A
// popular system prompt's load is shared by the set. The member answers
// what it holds and asks the owners for the rest, so nothing counts as held
// that is not; puts still go to the owners.

// spreadHintTTL is how long the client believes a report that a group is
// spread; maxSpreadHints bounds the groups it remembers.
const (
	spreadHintTTL  = 15 * time.Second
	maxSpreadHints = 4096
)

type spreadKey struct {
	namespace string
	key       [32]byte
}

type spreadHint struct {
	width int
	until time.Time
}

// spreadHints are the spread widths lookups reported, per group, and the
// load figures nodes answered (LookupResponse.load), per address. The zero
// value is ready; safe for concurrent use.
type spreadHints struct {
	mu    sync.Mutex
	m     map[spreadKey]spreadHint
	loads map[string]spreadHint // width holds the load
}

// noteLoad records the load node addr answered.
func (h *spreadHints) noteLoad(addr string, load uint32, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.loads == nil {
		h.loads = map[string]spreadHint{}
	}
	if _, ok := h.loads[addr]; !ok && len(h.loads) >= maxSpreadHints {
		return
	}
	h.loads[addr] = spreadHint{width: int(load), until: now.Add(spreadHintTTL)}
}

// load is the load node addr answered lately (0: unknown).
func (h *spreadHints) load(addr string, now time.Time) uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.loads[addr]
	if !ok || !now.Before(v.until) {
		return 0
	}
	return uint32(v.width)
}

// learn records the widths a lookup in namespace reported for its runs.
func (h *spreadHints) learn(namespace string, runs []*kvringv1.GroupRun, widths []uint32, now time.Time) {
	if len(widths) != len(runs) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, r := range runs {
		if len(r.GetKey()) != 32 {
			continue
		}
		k := spreadKey{namespace: namespace, key: [32]byte(r.GetKey())}
		if widths[i] <= 1 {
			delete(h.m, k)
			continue
		}
		if h.m == nil {
			h.m = map[spreadKey]spreadHint{}
		}
		if _, ok := h.m[k]; !ok && len(h.m) >= maxSpreadHints {
			for old, v := range h.m {
				if !now.Before(v.until) {
					delete(h.m, old)
				}
			}
			if len(h.m) >= maxSpreadHints {
				continue
			}
		}
		h.m[k] = spreadHint{width: int(widths[i]), until: now.Add(spreadHintTTL)}
	}
}

// width is how wide group key of namespace is spread as far as the
// client knows now (0: not known to be).
func (h *spreadHints) width(namespace string, key []byte, now time.Time) int {
	if len(key) != 32 {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.m[spreadKey{namespace: namespace, key: [32]byte(key)}]
	if !ok || !now.Before(v.until) {
		return 0
	}
	return v.width
}

// readMember returns the member a read of group key goes to: the less
// loaded of two random members of its spread set (by the loads they
// answered lately) when the group is known to be spread, else its primary
// owner. picked memoises the choice per key within one call.
func (r *router) readMember(rg *ring.Ring, namespace string, key []byte, picked map[string]ring.Member, now time.Time) (ring.Member, error) {
	if m, ok := picked[string(key)]; ok {
		return m, nil
	}
	m, err := rg.Primary(namespace, key)
	if err != nil {
		return m, err
	}
	if w := r.hints.width(namespace, key, now); w > 1 {
		if set := rg.SpreadSet(namespace, key, w); len(set) > 0 {
			m = set[choice.TwoChoices(len(set), func(i int) uint32 { return r.hints.load(set[i].Addr, now) })]
		}
	}
	picked[string(key)] = m
	return m, nil
}
