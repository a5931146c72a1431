package membership

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// suspectRefresh is how old the set Suspect reads may be. memberlist tells
// no delegate when it suspects a member, so the set is read from its member
// list, at most this often, by the caller of Suspect that finds it stale.
const suspectRefresh = 100 * time.Millisecond

// suspectSet caches the members gossip does not hold alive: suspected by
// memberlist (a probe failed and the member has not refuted it yet), or dead
// or left while a ring view may still list them.
type suspectSet struct {
	mu  sync.Mutex   // one refresh at a time; readers never wait for it
	at  atomic.Int64 // Unix nanoseconds of the last refresh (0: never)
	set atomic.Pointer[map[string]bool]
}

// Suspect reports whether gossip holds member id suspect, dead or gone:
// memberlist suspects it (its probes failed and it has not refuted them yet;
// it is declared dead once the suspicion timeout passes), or it died or
// left. Such a member is still on the ring until it is declared dead, so a
// coordinator uses this to stop waiting for it (a write's owner is then
// replaced or fails at once). This node is never suspect. The answer may
// be suspectRefresh old; it never blocks beyond a short lock of
// memberlist's member table (taken by the caller that finds the set stale).
func (m *Membership) Suspect(id string) bool {
	if id == m.cfg.NodeID {
		return false
	}
	s := &m.suspects
	if now := m.cfg.Now().UnixNano(); now-s.at.Load() >= int64(suspectRefresh) && s.mu.TryLock() {
		m.refreshSuspects(now)
		s.mu.Unlock()
	}
	set := s.set.Load()
	return set != nil && (*set)[id]
}

// refreshSuspects reads the set from memberlist and the member table: a
// member in the table is suspect unless memberlist lists it alive (so one
// memberlist declared dead is suspect before the ring goroutine has
// applied its death). The caller holds suspects.mu.
func (m *Membership) refreshSuspects(now int64) {
	set := map[string]bool{}
	if ml := m.ml.Load(); ml != nil {
		alive := map[string]bool{}
		for _, n := range ml.Members() {
			if n.State == memberlist.StateAlive {
				alive[n.Name] = true
			}
		}
		m.rs.tableMu.Lock()
		for id := range m.rs.table {
			if !alive[id] {
				set[id] = true
			}
		}
		m.rs.tableMu.Unlock()
	}
	m.suspects.set.Store(&set)
	m.suspects.at.Store(now)
}
