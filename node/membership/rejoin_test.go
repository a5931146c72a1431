package membership

import (
	"slices"
	"testing"
	"time"
)

// TestMembershipFindsAMemberDeclaredDeadAgainWithoutWaitingForTheRejoinInterval:
// after a partition heals, each side holds the other dead, and memberlist
// probes and gossips only to live members, so only a join brings them
// together. Here a joined b with an hour's RejoinInterval; b's gossip stops
// without a goodbye (as behind a partition) and a declares it dead; b comes
// back on its address joining no one (the far side, whose own round is not
// due). a must find it within seconds: the loss wakes a's rejoin loop, whose
// failing retries are capped near the suspicion timeout. Found by
// loadtest/netfault: a 10 s partition stayed split for 17 s after its heal,
// until the next rejoin round (netfault -nodes 3 -seed 4 -schedule
// quiet:5s,pause:8s,quiet:5s,halves:10s).
func TestMembershipFindsAMemberDeclaredDeadAgainWithoutWaitingForTheRejoinInterval(t *testing.T) {
	t.Parallel()
	port := holdGossipPort(t)
	bCfg, bLogs := testMembershipConfig(t, "b")
	bCfg.GossipAddr = port.addr()
	port.releaseUDP()
	b := startTestMember(t, bCfg, bLogs)
	aCfg, aLogs := testMembershipConfig(t, "a")
	aCfg.Join = []string{port.addr()}
	aCfg.RejoinInterval = time.Hour
	a := startTestMember(t, aCfg, aLogs)
	both := []string{"a", "b"}
	waitForMembership(t, "a sees b", func() bool { return slices.Equal(aliveMemberIDs(a.Membership), both) })

	vanish(t, b.Membership)
	waitForMembership(t, "a declares b dead", func() bool {
		return slices.Equal(aliveMemberIDs(a.Membership), []string{"a"})
	})

	b2Cfg, b2Logs := testMembershipConfig(t, "b")
	b2Cfg.GossipAddr = port.addr()
	b2 := startTestMember(t, b2Cfg, b2Logs)
	waitForMembership(t, "a finds b again", func() bool {
		return slices.Equal(aliveMemberIDs(a.Membership), both) && slices.Equal(ringMemberIDs(a.Ring()), both)
	})
	waitForMembership(t, "b finds a again", func() bool { return slices.Equal(aliveMemberIDs(b2.Membership), both) })
}

// vanish stops m as a crash or a partition would: its goroutines end and its
// gossip shuts down without a goodbye, so its peers must declare it dead.
// Close does nothing afterwards.
func vanish(t *testing.T, m *Membership) {
	t.Helper()
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	m.closed = true
	m.cancel()
	m.wg.Wait()
	if err := m.ml.Load().Shutdown(); err != nil {
		t.Fatal(err)
	}
}
