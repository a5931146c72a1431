package membership

import (
	"context"
	"net"
	"net/netip"
	"strings"
)

// Members this node cannot reach directly though gossip holds them alive.
//
// A partition that cuts this node from a member while a third member still
// reaches both (a bridge: A sees B, B sees C, A and C are cut) never makes
// gossip suspect the member: A's direct probe of C fails, but B's indirect
// probe on A's behalf succeeds, so C stays alive for everyone, and a write
// coordinated by A waited for C up to PeerTimeout per step. memberlist
// logs the failed direct ping ("Failed UDP ping: C (timeout reached)")
// before it asks others, and says nothing when they answer. Each such line
// queues C for checkReach, which pings C directly reachPings times more,
// each time followed by a ping of another member (B, say); when C answered
// none and B every one, C is marked in the suspect set as if this node's
// probe of it had failed (Suspect reports it, and writes go around it),
// until C answers one of this node's direct probes again (pingDelegate),
// joins again, or the mark lapses. A direct ping lost to packet loss alone
// is answered by one of the next ones: with 5 % loss on every link, one
// ping and its ack both get through 90 % of the time. A node too slow to
// see acks in time (a loaded machine) misses the control's as well, and
// marks nothing.

// reachPings is how many more direct pings a member whose direct ping
// failed must leave unanswered before this node marks it unreachable.
const reachPings = 2

// reachQueue bounds the members waiting for a check; a line that finds the
// queue full is dropped (the member's next failed ping queues it again).
const reachQueue = 64

// failedPingLinePrefix and failedPingLineSuffix frame memberlist's log line
// for a direct ping that got no ack within the probe timeout (memberlist's
// state.go, probeNode and Ping).
const failedPingLinePrefix, failedPingLineSuffix = "Failed UDP ping: ", " (timeout reached)"

// failedPingIn returns the member a memberlist log line (its level and
// "memberlist: " prefix removed) says a direct ping of failed.
func failedPingIn(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, failedPingLinePrefix)
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, failedPingLineSuffix)
	return name, ok && name != ""
}

// queueReachCheck queues member name for a reach check; it never blocks.
// Lines written while a check runs are dropped: the check's own failed
// pings write them (memberlist logs them from the checking goroutine,
// before Ping returns), and a member gossip probes meanwhile is probed
// again next round.
func (m *Membership) queueReachCheck(name string) {
	if m.reachBusy.Load() {
		return
	}
	select {
	case m.reach <- name:
	default:
	}
}

// reachLoop checks the members queued by queueReachCheck, one at a time,
// until ctx ends.
func (m *Membership) reachLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-m.reach:
			m.reachBusy.Store(true)
			m.checkReach(ctx, name)
			m.reachBusy.Store(false)
		}
	}
}

// checkReach pings member name directly up to reachPings times, each time
// followed by a ping of another member (the control), and marks it
// unreachable from here when it answered none while the control answered
// every one. A control that does not answer either means this node may be
// the one in trouble (a stalled process, a loaded machine, its own link):
// nothing is marked, and gossip's own probes judge. A member already
// suspected, or not alive in the member table, is left alone, as is one
// with no other alive member to compare against. It blocks for up to
// 2 × reachPings probe timeouts.
func (m *Membership) checkReach(ctx context.Context, name string) {
	ml := m.ml.Load()
	if ml == nil || name == m.cfg.NodeID || m.Suspect(name) {
		return
	}
	addr, ok := m.gossipAddrOf(name)
	if !ok {
		return
	}
	control, caddr, ok := m.controlFor(name)
	if !ok {
		return
	}
	for range reachPings {
		if ctx.Err() != nil {
			return
		}
		if _, err := ml.Ping(name, net.UDPAddrFromAddrPort(addr)); err == nil {
			return
		}
		if _, err := ml.Ping(control, net.UDPAddrFromAddrPort(caddr)); err != nil {
			return
		}
	}
	m.suspects.probeFailed(name, m.cfg.Now())
	m.log.Info("member unreachable from this node though gossip holds it alive; writes go around it until it answers a probe",
		"member", name, "pings", reachPings+1, "answered_by", control)
}

// controlFor returns another alive member than name and this node, and its
// gossip address, to ping alongside name.
func (m *Membership) controlFor(name string) (string, netip.AddrPort, bool) {
	m.rs.tableMu.Lock()
	defer m.rs.tableMu.Unlock()
	for id, mem := range m.rs.table {
		if id == name || id == m.cfg.NodeID || mem.Liveness != Alive {
			continue
		}
		if addr, err := netip.ParseAddrPort(mem.GossipAddr); err == nil {
			return id, addr, true
		}
	}
	return "", netip.AddrPort{}, false
}

// gossipAddrOf returns the gossip address of member name if it is in the
// member table and alive.
func (m *Membership) gossipAddrOf(name string) (netip.AddrPort, bool) {
	m.rs.tableMu.Lock()
	mem := m.rs.table[name]
	var s string
	if mem != nil && mem.Liveness == Alive {
		s = mem.GossipAddr
	}
	m.rs.tableMu.Unlock()
	addr, err := netip.ParseAddrPort(s)
	return addr, err == nil
}
