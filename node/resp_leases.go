package node

import (
	"sync"
	"time"

	"github.com/kvring/kvring/node/internal/resp"
	"github.com/kvring/kvring/store"
)

// existsLeases remembers the lookup leases the Redis-protocol port's EXISTS
// took on this node, by the chunk ids they pin, until they end: a DEL of a
// key releases them first (the lease keeps a key from eviction so that a
// GET finds it, not from its client's own DEL). A lease another node's
// port took is not known here: a DEL through this node then answers that
// the key is pinned until it ends. Safe for concurrent use.
type existsLeases struct {
	mu sync.Mutex
	m  map[store.ID]existsLease
}

type existsLease struct {
	id  uint64
	end time.Time
}

// maxExistsLeases bounds the ids remembered: past it the ended leases are
// forgotten, and if that is not enough, all (their DELs may then answer
// "pinned" until the leases end by themselves).
const maxExistsLeases = 1 << 16

// add remembers lease id, pinning the chunks of keys for ttl.
func (l *existsLeases) add(keys []resp.Key, id uint64, ttl time.Duration) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[store.ID]existsLease{}
	}
	if len(l.m) >= maxExistsLeases {
		for k, e := range l.m {
			if !now.Before(e.end) {
				delete(l.m, k)
			}
		}
		if len(l.m) >= maxExistsLeases {
			clear(l.m)
		}
	}
	for _, k := range keys {
		l.m[k.ID] = existsLease{id: id, end: now.Add(ttl)}
	}
}

// take forgets and returns the leases still running that pin keys.
func (l *existsLeases) take(keys []resp.Key) []uint64 {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []uint64
	for _, k := range keys {
		e, ok := l.m[k.ID]
		if !ok {
			continue
		}
		delete(l.m, k.ID)
		if now.Before(e.end) {
			out = append(out, e.id)
		}
	}
	return out
}
