package membership

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/ring"
)

type testMembership struct {
	*Membership
	logs *testutil.Logs
}

// testMembershipConfig is LocalConfig with a captured logger and fake service addresses.
func testMembershipConfig(t *testing.T, id string) (Config, *testutil.Logs) {
	t.Helper()
	logs := &testutil.Logs{}
	cfg := LocalConfig(id)
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test_node", id)
	cfg.GRPCAddr = "127.0.0.1:9600/" + id // placeholders: nothing dials them here
	cfg.AdminAddr = "127.0.0.1:9602/" + id
	cfg.Ring.ReplicationFactor = 3
	// A bound on a hang: LocalConfig's 2s for a leave or a state change to
	// go out is outrun by a loaded 2-core machine under the race detector
	// ("timeout waiting for update broadcast").
	cfg.BroadcastTimeout = 30 * time.Second
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of %s:\n%s", id, logs)
		}
	})
	return cfg, logs
}

// startTestMember starts a membership built from cfg and closes it when the test ends.
func startTestMember(t *testing.T, cfg Config, logs *testutil.Logs) testMembership {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	return testMembership{m, logs}
}

// waitForMembership waits until cond holds (gossip is asynchronous).
func waitForMembership(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, what, 10*time.Second, cond)
}

func aliveMemberIDs(m *Membership) []string {
	var ids []string
	for _, mi := range m.Members() {
		if mi.Liveness == Alive {
			ids = append(ids, mi.ID)
		}
	}
	return ids
}

func ringMemberIDs(r *ring.Ring) []string { return memberIDs(r.Members()) }

// startTestMembers starts members named ids, all joining the first one.
func startTestMembers(t *testing.T, ids ...string) []testMembership {
	t.Helper()
	var ms []testMembership
	for i, id := range ids {
		cfg, logs := testMembershipConfig(t, id)
		if i > 0 {
			cfg.Join = []string{ms[0].GossipAddr()}
		}
		ms = append(ms, startTestMember(t, cfg, logs))
	}
	for _, m := range ms {
		waitForMembership(t, m.cfg.NodeID+" sees every member alive and on its ring", func() bool {
			return slices.Equal(aliveMemberIDs(m.Membership), ids) && slices.Equal(ringMemberIDs(m.Ring()), ids)
		})
	}
	return ms
}

func requireSameOwners(t *testing.T, a, b *ring.Ring) {
	t.Helper()
	if !slices.Equal(a.Members(), b.Members()) {
		t.Fatalf("ring members differ: %v vs %v", a.Members(), b.Members())
	}
	for i := range 200 {
		id := sha256.Sum256(fmt.Appendf(nil, "chunk-%d", i))
		oa, ob := a.Owners("ns", id[:], 3), b.Owners("ns", id[:], 3)
		if !slices.Equal(oa, ob) {
			t.Fatalf("key %d: owners %v vs %v", i, oa, ob)
		}
	}
}

func TestMembershipThreeNodesAgreeOnRing(t *testing.T) {
	t.Parallel()
	ms := startTestMembers(t, "a", "b", "c")
	for _, m := range ms[1:] {
		requireSameOwners(t, ms[0].Ring(), m.Ring())
	}
	for _, mi := range ms[0].Members() {
		if mi.GRPCAddr != "127.0.0.1:9600/"+mi.ID || mi.AdminAddr != "127.0.0.1:9602/"+mi.ID ||
			mi.State != Joining || mi.BootTime.IsZero() || mi.GossipAddr == "" {
			t.Errorf("member info %+v", mi)
		}
	}
	for _, m := range ms {
		if got := m.logs.Count(`msg="member joined"`); got != 3 {
			t.Errorf("%s logged %d joins, want 3", m.cfg.NodeID, got)
		}
	}

	// A state change reaches the peers and is logged once; it does not change ownership.
	epoch := ms[0].Ring().Epoch()
	if err := ms[1].SetState(t.Context(), Active); err != nil {
		t.Fatal(err)
	}
	waitForMembership(t, "a sees b active", func() bool {
		i := slices.IndexFunc(ms[0].Members(), func(mi Member) bool { return mi.ID == "b" })
		return ms[0].Members()[i].State == Active
	})
	if got := ms[0].logs.Count(`msg="member updated"`, "member=b", "state=active"); got != 1 {
		t.Errorf("a logged b's update %d times, want 1", got)
	}
	if got := ms[0].RebuildNow().Epoch(); got != epoch {
		t.Errorf("state change without ownership change moved epoch %d → %d", epoch, got)
	}
}

func TestMembershipLeaveRebuildsPeersRings(t *testing.T) {
	t.Parallel()
	ms := startTestMembers(t, "a", "b", "c")
	before := ms[0].Ring()
	changes := make(chan [2]*ring.Ring, 16)
	ms[0].rs.rebuildMu.Lock() // onChange is read by the ring goroutine under rebuildMu
	ms[0].rs.onChange = func(old, new *ring.Ring) { changes <- [2]*ring.Ring{old, new} }
	ms[0].rs.rebuildMu.Unlock()

	if err := ms[2].Close(t.Context()); err != nil {
		t.Fatalf("close: %v", err)
	}
	for _, m := range ms[:2] {
		waitForMembership(t, m.cfg.NodeID+" sees c leave", func() bool {
			return slices.Equal(aliveMemberIDs(m.Membership), []string{"a", "b"}) &&
				slices.Equal(ringMemberIDs(m.Ring()), []string{"a", "b"})
		})
		i := slices.IndexFunc(m.Members(), func(mi Member) bool { return mi.ID == "c" })
		if i < 0 || m.Members()[i].Liveness != Left {
			t.Errorf("%s: c is %+v, want listed as left", m.cfg.NodeID, m.Members())
		}
		waitForMembership(t, m.cfg.NodeID+" logs c leaving", func() bool {
			return m.logs.Count(`msg="member left"`, "member=c", "liveness=left") == 1
		})
	}
	requireSameOwners(t, ms[0].Ring(), ms[1].Ring())
	if after := ms[0].Ring(); after.Epoch() <= before.Epoch() {
		t.Errorf("epoch did not grow: %d → %d", before.Epoch(), after.Epoch())
	}
	select {
	case c := <-changes:
		if !slices.Equal(ringMemberIDs(c[0]), []string{"a", "b", "c"}) || !slices.Equal(ringMemberIDs(c[1]), []string{"a", "b"}) ||
			c[1].Epoch() != c[0].Epoch()+1 {
			t.Errorf("onRingChange got %v@%d → %v@%d", ringMemberIDs(c[0]), c[0].Epoch(), ringMemberIDs(c[1]), c[1].Epoch())
		}
	default:
		t.Error("onRingChange was not called")
	}
	if got := ms[0].logs.Count(`msg="ring rebuilt"`, fmt.Sprintf("epoch=%d ", ms[0].Ring().Epoch()), `members="[a b]"`); got != 1 {
		t.Errorf("a logged the rebuild without c %d times, want 1", got)
	}
}

func TestMembershipRefusesPeerWithDifferentRingSettings(t *testing.T) {
	t.Parallel()
	ms := startTestMembers(t, "a", "b")
	cfg, logs := testMembershipConfig(t, "odd")
	cfg.Ring.PartitionCount = 1031
	cfg.Join = []string{ms[0].GossipAddr()}
	cfg.RejoinInterval = 50 * time.Millisecond
	odd := startTestMember(t, cfg, logs)

	waitForMembership(t, "a logs the refusal", func() bool { return ms[0].logs.Count(`msg="refusing peer`, "peer=odd") > 0 })
	waitForMembership(t, "odd logs the refusal", func() bool { return odd.logs.Count(`msg="refusing peer`, "peer=a") == 1 })
	// Let odd try again a few times: each try is refused, quietly.
	waitForMembership(t, "odd retries", func() bool { return odd.logs.Count(`msg="join attempt failed"`) >= 3 })

	wantFP := fmt.Sprintf("peer settings fingerprint %s, local settings fingerprint %s", cfg.Ring.SettingsFingerprint(),
		ms[0].cfg.Ring.SettingsFingerprint())
	if got := ms[0].logs.Count(`msg="refusing peer`, "peer=odd", wantFP, "level=ERROR"); got != 1 {
		t.Errorf("a logged the refusal of odd %d times, want once at ERROR with both fingerprints", got)
	}
	if got := odd.logs.Count(`msg="cannot join seeds`, "ring settings differ", "level=WARN"); got != 1 {
		t.Errorf("odd logged its failed join %d times, want once", got)
	}
	for _, m := range ms {
		m.RebuildNow()
		if ids := aliveMemberIDs(m.Membership); !slices.Equal(ids, []string{"a", "b"}) {
			t.Errorf("%s counts members %v", m.cfg.NodeID, ids)
		}
		if ids := ringMemberIDs(m.Ring()); !slices.Equal(ids, []string{"a", "b"}) {
			t.Errorf("%s ring members %v", m.cfg.NodeID, ids)
		}
	}
	if ids := aliveMemberIDs(odd.Membership); !slices.Equal(ids, []string{"odd"}) {
		t.Errorf("odd counts members %v", ids)
	}
}

// gossipPort is a port held for a gossip listener a test starts later: TCP
// stays held (a join attempt is refused, no other test's socket is given the
// port), and UDP is held until release, which the test calls just before the
// member that listens there starts.
type gossipPort struct {
	tcp *testutil.PortHold
	udp net.PacketConn
}

// holdGossipPort holds a port for TCP and UDP on 127.0.0.1 until the test ends.
func holdGossipPort(t *testing.T) *gossipPort {
	t.Helper()
	for range 20 {
		h, err := testutil.HoldPort("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		udp, err := net.ListenPacket("udp", h.Addr())
		if err != nil { // another socket has the UDP side: try another port
			h.Close()
			continue
		}
		g := &gossipPort{tcp: h, udp: udp}
		t.Cleanup(func() { h.Close(); udp.Close() })
		return g
	}
	t.Fatal("no port free for both TCP and UDP")
	return nil
}

func (g *gossipPort) addr() string { return g.tcp.Addr() }

// releaseUDP frees the UDP side for the member about to bind it; memberlist
// listens on TCP with SO_REUSEADDR, so the held TCP socket does not stop it.
func (g *gossipPort) releaseUDP() { g.udp.Close() }

func TestMembershipJoinsSeedThatStartsLater(t *testing.T) {
	t.Parallel()
	port := holdGossipPort(t)
	seedAddr := port.addr()
	cfg, logs := testMembershipConfig(t, "early")
	cfg.Join = []string{seedAddr}
	cfg.RejoinInterval = 50 * time.Millisecond
	early := startTestMember(t, cfg, logs)
	if ids := ringMemberIDs(early.Ring()); !slices.Equal(ids, []string{"early"}) {
		t.Fatalf("without its seed the ring is %v, want just itself", ids)
	}
	waitForMembership(t, "early retries", func() bool { return early.logs.Count(`msg="join attempt failed"`) >= 2 })

	seedCfg, seedLogs := testMembershipConfig(t, "seed")
	seedCfg.GossipAddr = seedAddr
	port.releaseUDP()
	seed := startTestMember(t, seedCfg, seedLogs)

	want := []string{"early", "seed"}
	for _, m := range []testMembership{early, seed} {
		waitForMembership(t, m.cfg.NodeID+" sees both", func() bool {
			return slices.Equal(aliveMemberIDs(m.Membership), want) && slices.Equal(ringMemberIDs(m.Ring()), want)
		})
	}
	if got := early.logs.Count(`msg="cannot join seeds`, "level=WARN"); got != 1 {
		t.Errorf("the unreachable seed was logged %d times at WARN, want once", got)
	}
	waitForMembership(t, "early logs the join", func() bool {
		return early.logs.Count(`msg="joined seeds"`, "after_failures=true") == 1
	})
}

// membershipGoroutines reports whether any goroutine runs a method of the given membership.
func membershipGoroutines(m *Membership) (ringLoop, rejoinLoop, reachLoop bool) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	s := string(buf)
	return strings.Contains(s, fmt.Sprintf("(*ringState).loop(%p", m.rs)),
		strings.Contains(s, fmt.Sprintf("(*Membership).rejoinLoop(%p", m)),
		strings.Contains(s, fmt.Sprintf("(*Membership).reachLoop(%p", m))
}

func TestMembershipCloseIsIdempotentAndWaits(t *testing.T) {
	t.Parallel()
	cfg, logs := testMembershipConfig(t, "solo")
	cfg.Join = []string{holdGossipPort(t).addr()} // held, nobody listens: the rejoin loop keeps going
	cfg.RejoinInterval = 20 * time.Millisecond
	m := startTestMember(t, cfg, logs)
	waitForMembership(t, "the goroutines run", func() bool { a, b, c := membershipGoroutines(m.Membership); return a && b && c })

	if err := m.Close(t.Context()); err != nil {
		t.Fatalf("close: %v", err)
	}
	if a, b, c := membershipGoroutines(m.Membership); a || b || c {
		t.Fatalf("after close: ring goroutine running %v, rejoin loop running %v, reach check running %v", a, b, c)
	}
	if err := m.Close(t.Context()); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if got := logs.Count(`msg="left cluster"`); got != 1 {
		t.Errorf("logged leaving %d times, want 1", got)
	}
	if err := m.Start(t.Context()); err == nil {
		t.Error("start after close succeeded")
	}
	if r := m.Ring(); r == nil || r.Len() != 1 {
		t.Errorf("ring after close: %v", r)
	}

	// A membership that never started closes at once.
	never, err := New(LocalConfig("never"))
	if err != nil {
		t.Fatal(err)
	}
	if err := never.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := never.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestMembershipPartitionedGroupsMergeThroughRejoin: two gossip groups that
// formed apart ({c, d}, whose seed a was unreachable, and {a, b}) become one
// cluster once the seed answers, through the rejoin loop alone, and all four
// agree on the ring.
func TestMembershipPartitionedGroupsMergeThroughRejoin(t *testing.T) {
	t.Parallel()
	port := holdGossipPort(t)
	cCfg, cLogs := testMembershipConfig(t, "c")
	cCfg.Join = []string{port.addr()}
	cCfg.RejoinInterval = 50 * time.Millisecond
	c := startTestMember(t, cCfg, cLogs)
	dCfg, dLogs := testMembershipConfig(t, "d")
	dCfg.Join = []string{c.GossipAddr()}
	d := startTestMember(t, dCfg, dLogs)
	for _, m := range []testMembership{c, d} {
		waitForMembership(t, m.cfg.NodeID+" sees the group {c, d}", func() bool {
			return slices.Equal(ringMemberIDs(m.Ring()), []string{"c", "d"})
		})
	}
	waitForMembership(t, "c fails to reach its seed", func() bool { return c.logs.Count(`msg="join attempt failed"`) >= 1 })

	aCfg, aLogs := testMembershipConfig(t, "a")
	aCfg.GossipAddr = port.addr()
	port.releaseUDP()
	a := startTestMember(t, aCfg, aLogs)
	bCfg, bLogs := testMembershipConfig(t, "b")
	bCfg.Join = []string{a.GossipAddr()}
	b := startTestMember(t, bCfg, bLogs)

	all := []string{"a", "b", "c", "d"}
	ms := []testMembership{a, b, c, d}
	for _, m := range ms {
		waitForMembership(t, m.cfg.NodeID+" sees all four alive and on its ring", func() bool {
			return slices.Equal(aliveMemberIDs(m.Membership), all) && slices.Equal(ringMemberIDs(m.Ring()), all)
		})
	}
	for _, m := range ms[1:] {
		requireSameOwners(t, a.Ring(), m.Ring())
	}
}
