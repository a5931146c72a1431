package membership

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// suspectRefresh is how old the dead-or-gone part of the set Suspect reads
// may be: it is read from memberlist's member list, at most this often, by
// the caller of Suspect that finds it stale.
const suspectRefresh = 100 * time.Millisecond

// suspectSet is what Suspect answers from. memberlist tells no delegate
// when it suspects a member, and the state it keeps for each member is not
// exported (Members lists suspects as alive), so two signals stand in for
// it:
//
//   - this node's own probe of the member failed (memberlist logs
//     "Suspect X has failed, no acks received" and starts the suspicion
//     there), and no direct probe of it succeeded since
//     (memberlist.PingDelegate) nor did it join again (after it was
//     declared dead: a healed partition); the mark lapses after the longest
//     a suspicion can last, by when the member was declared dead or refuted;
//   - the member is in the member table but memberlist does not list it
//     alive: declared dead or gone, and perhaps still on a ring view.
//
// A suspicion this node only heard of by gossip is not seen: this node's own
// probe of the member follows within 2 × (n − 1) probe intervals.
type suspectSet struct {
	// lapse is how long a failed probe marks a member: the longest a
	// suspicion lasts (SuspicionMaxTimeoutMult suspicion timeouts).
	lapse time.Duration

	probeMu sync.Mutex
	probed  map[string]time.Time // member → when this node's probe of it failed

	mu  sync.Mutex   // one refresh at a time; readers never wait for it
	at  atomic.Int64 // Unix nanoseconds of the last refresh (0: never)
	set atomic.Pointer[map[string]bool]
}

// Suspect reports whether gossip may hold member id down: this node's probe
// of it failed lately and none succeeded since, or memberlist declared it
// dead or it left (see suspectSet). Such a member stays on the ring until
// it is declared dead, so a coordinator uses this to stop waiting for it (a
// write's owner is then replaced or given up at once). This node is never
// suspect. It never blocks beyond short locks (the caller that finds the
// dead-or-gone part stale reads memberlist's member table).
func (m *Membership) Suspect(id string) bool {
	if id == m.cfg.NodeID {
		return false
	}
	now := m.cfg.Now()
	s := &m.suspects
	s.probeMu.Lock()
	failed, ok := s.probed[id]
	if ok && now.Sub(failed) > s.lapse {
		delete(s.probed, id)
		ok = false
	}
	s.probeMu.Unlock()
	if ok {
		return true
	}
	if n := now.UnixNano(); n-s.at.Load() >= int64(suspectRefresh) && s.mu.TryLock() {
		m.refreshGone(n)
		s.mu.Unlock()
	}
	set := s.set.Load()
	return set != nil && (*set)[id]
}

// probeFailed marks member name: this node's probe of it failed.
func (s *suspectSet) probeFailed(name string, now time.Time) {
	s.probeMu.Lock()
	if s.probed == nil {
		s.probed = map[string]time.Time{}
	}
	s.probed[name] = now
	s.probeMu.Unlock()
}

// probeAnswered clears member name's mark: it answered a probe, or joined.
func (s *suspectSet) probeAnswered(name string) {
	s.probeMu.Lock()
	delete(s.probed, name)
	s.probeMu.Unlock()
}

// refreshGone reads the dead-or-gone part of the set: a member in the
// table is in it unless memberlist lists it (so one memberlist declared
// dead is in it before the ring goroutine has applied its death). The
// caller holds suspects.mu.
func (m *Membership) refreshGone(now int64) {
	set := map[string]bool{}
	if ml := m.ml.Load(); ml != nil {
		listed := map[string]bool{}
		for _, n := range ml.Members() {
			listed[n.Name] = true
		}
		m.rs.tableMu.Lock()
		for id := range m.rs.table {
			if !listed[id] {
				set[id] = true
			}
		}
		m.rs.tableMu.Unlock()
	}
	m.suspects.set.Store(&set)
	m.suspects.at.Store(now)
}

// suspectLine is how memberlist logs that this node's probe of a member
// failed and its suspicion starts (memberlist's state.go, probeNode).
const suspectLinePrefix, suspectLineSuffix = "Suspect ", " has failed, no acks received"

// suspectedIn returns the member a memberlist log line (its level and
// "memberlist: " prefix removed) says this node's probe failed for.
func suspectedIn(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, suspectLinePrefix)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, suspectLineSuffix)
	return name, ok && name != ""
}

// pingDelegate clears a member's mark when it answers one of this node's
// probes directly.
type pingDelegate struct{ s *suspectSet }

func (pingDelegate) AckPayload() []byte { return nil }

func (d pingDelegate) NotifyPingComplete(other *memberlist.Node, _ time.Duration, _ []byte) {
	d.s.probeAnswered(other.Name)
}
