package membership

import (
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/kvring/kvring/internal/testutil"
)

// TestSuspectFollowsGossip: a member whose gossip stops without a goodbye
// (a crash, a partition) is reported suspect by a peer once the peer's
// probe of it fails, long before it is declared dead (a suspicion timeout
// of 20 probe intervals here), and still once it is; live members and the
// node itself never are.
func TestSuspectFollowsGossip(t *testing.T) {
	t.Parallel()
	var ms []testMembership
	for i, id := range []string{"a", "b", "c"} {
		cfg, logs := testMembershipConfig(t, id)
		cfg.Timing.SuspicionMult = 20
		if i > 0 {
			cfg.Join = []string{ms[0].GossipAddr()}
		}
		ms = append(ms, startTestMember(t, cfg, logs))
	}
	a, all := ms[0], []string{"a", "b", "c"}
	waitForMembership(t, "a sees every member", func() bool { return slices.Equal(aliveMemberIDs(a.Membership), all) })
	for _, id := range []string{"a", "b", "c", "nobody"} {
		if a.Suspect(id) {
			t.Fatalf("a suspects %s in a healthy cluster", id)
		}
	}
	vanish(t, ms[2].Membership)
	waitForMembership(t, "a suspects c", func() bool { return a.Suspect("c") })
	if !slices.Equal(aliveMemberIDs(a.Membership), all) {
		t.Fatalf("c was declared dead before a suspected it: suspicion came too late to help (alive %v)", aliveMemberIDs(a.Membership))
	}
	testutil.Eventually(t, "a declares c dead", 60*time.Second, func() bool { return slices.Equal(aliveMemberIDs(a.Membership), []string{"a", "b"}) })
	if !a.Suspect("c") || a.Suspect("a") || a.Suspect("b") {
		t.Fatalf("after c was declared dead: suspect a %v, b %v, c %v; want c only", a.Suspect("a"), a.Suspect("b"), a.Suspect("c"))
	}
}

// TestAProbeAnsweredClearsASuspicion: the mark a failed probe leaves
// lasts until the member answers a probe, or until the longest suspicion.
func TestAProbeAnsweredClearsASuspicion(t *testing.T) {
	now := time.Unix(1000, 0)
	cfg := LocalConfig("self")
	cfg.Now = func() time.Time { return now }
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := memberlistLog{log: cfg.Logger, suspect: func(name string) { m.suspects.probeFailed(name, now) }}
	if _, err := w.Write([]byte("[INFO] memberlist: Suspect peer-1 has failed, no acks received\n")); err != nil {
		t.Fatal(err)
	}
	if !m.Suspect("peer-1") || m.Suspect("peer-2") {
		t.Fatal("a failed probe of peer-1 does not make it (alone) suspect")
	}
	pingDelegate{&m.suspects}.NotifyPingComplete(&memberlist.Node{Name: "peer-1"}, time.Millisecond, nil)
	if m.Suspect("peer-1") {
		t.Fatal("peer-1 answered a probe and is still suspect")
	}
	m.suspects.probeFailed("peer-1", now)
	now = now.Add(m.cfg.Timing.longestSuspicion() + time.Second)
	if m.Suspect("peer-1") {
		t.Fatal("a failed probe still marks peer-1 after the longest suspicion")
	}
}

// TestAMemberThatJoinsAgainIsNoLongerSuspect: after a partition heals, the
// members of the other side join again; the probes of them that failed
// while it lasted no longer count. (They did until the next probe of each:
// writes skipped them for up to a probe round after the heal, and failed
// the chunks none of whose ring-order members was left.)
func TestAMemberThatJoinsAgainIsNoLongerSuspect(t *testing.T) {
	cfg := LocalConfig("self")
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.suspects.probeFailed("peer-1", time.Now())
	d := memberDelegate{meta: &m.meta, rs: m.rs, suspects: &m.suspects}
	d.NotifyJoin(&memberlist.Node{Name: "peer-1"})
	if m.Suspect("peer-1") {
		t.Fatal("peer-1 joined again and is still suspect")
	}
}
