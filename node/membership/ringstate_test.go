package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/kvring/kvring/internal/testutil"
	"github.com/kvring/kvring/ring"
)

// newTestRingState returns a ringState over a small ring, logging into the returned buffer.
func newTestRingState(t *testing.T) (*ringState, *testutil.Logs) {
	t.Helper()
	logs := &testutil.Logs{}
	cfg := ring.DefaultConfig()
	cfg.PartitionCount = 257
	rs, err := newRingState(cfg, DefaultVersions(), "a", 2*time.Minute, time.Now, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs)
		}
	})
	return rs, logs
}

func testMemberEvent(t *testing.T, kind memberEventKind, id string, state State, fingerprint string) memberEvent {
	t.Helper()
	b, err := nodeMeta{NodeID: id, GRPCAddr: id + ":9600", AdminAddr: id + ":9602", State: state,
		BootTime: time.UnixMilli(1), Fingerprint: fingerprint}.encode()
	if err != nil {
		t.Fatal(err)
	}
	return memberEvent{kind: kind, name: id, gossipAddr: id + ":7946", meta: b}
}

func livenessOf(rs *ringState, id string) Liveness {
	for _, m := range rs.members() {
		if m.ID == id {
			return m.Liveness
		}
	}
	return 0
}

func TestMembershipRingStateOwnershipAndEpochs(t *testing.T) {
	t.Parallel()
	rs, logs := newTestRingState(t)
	fp := rs.cfg.Fingerprint()
	var changes [][2]uint64
	rs.onChange = func(old, new *ring.Ring) { changes = append(changes, [2]uint64{old.Epoch(), new.Epoch()}) }
	ev := func(kind memberEventKind, id string, s State) { rs.push(testMemberEvent(t, kind, id, s, fp)) }

	if r := rs.ring(); r.Epoch() != 0 || r.Len() != 0 {
		t.Fatalf("initial ring: epoch %d, %d members", r.Epoch(), r.Len())
	}
	steps := []struct {
		name      string
		do        func()
		wantEpoch uint64
		wantRing  []string
	}{
		{"three join (joining members own partitions)", func() {
			ev(eventJoin, "a", Joining)
			ev(eventJoin, "b", Joining)
			ev(eventJoin, "c", Joining)
		}, 1, []string{"a", "b", "c"}},
		{"nothing happened", func() {}, 1, []string{"a", "b", "c"}},
		{"b active: no ownership change", func() { ev(eventUpdate, "b", Active) }, 1, []string{"a", "b", "c"}},
		{"b draining: still an owner", func() { ev(eventUpdate, "b", Draining) }, 1, []string{"a", "b", "c"}},
		{"c leaving: no longer an owner", func() { ev(eventUpdate, "c", Leaving) }, 2, []string{"a", "b"}},
		{"c left", func() { ev(eventLeave, "c", Leaving) }, 2, []string{"a", "b"}},
		{"b died while draining", func() { ev(eventLeave, "b", Draining) }, 3, []string{"a"}},
		{"b is back", func() { ev(eventJoin, "b", Joining) }, 4, []string{"a", "b"}},
	}
	for _, s := range steps {
		s.do()
		r := rs.runOnce()
		if r != rs.ring() || r.Epoch() != s.wantEpoch || !slices.Equal(ringMemberIDs(r), s.wantRing) {
			t.Fatalf("%s: ring %v at epoch %d, want %v at %d", s.name, ringMemberIDs(r), r.Epoch(), s.wantRing, s.wantEpoch)
		}
	}
	if want := [][2]uint64{{0, 1}, {1, 2}, {2, 3}, {3, 4}}; !slices.Equal(changes, want) {
		t.Errorf("onChange saw %v, want %v", changes, want)
	}
	if l := livenessOf(rs, "c"); l != Left {
		t.Errorf("c is %v, want left", l)
	}
	for _, c := range []struct {
		parts []string
		want  int
	}{
		{[]string{`msg="member joined"`}, 4},
		{[]string{`msg="member updated"`, "member=b"}, 2},
		{[]string{`msg="member updated"`, "member=c", "state=leaving", "old_state=joining"}, 1},
		{[]string{`msg="member left"`, "member=c", "liveness=left"}, 1},
		{[]string{`msg="member left"`, "member=b", "liveness=dead"}, 1},
		{[]string{`msg="ring rebuilt"`}, 4},
		{[]string{`msg="ring rebuilt"`, "epoch=2", `members="[a b]"`, "moved="}, 1},
	} {
		if got := logs.Count(c.parts...); got != c.want {
			t.Errorf("%d log lines with %q, want %d", got, c.parts, c.want)
		}
	}
}

func TestMembershipRingStateCoalescesAndNeverBlocks(t *testing.T) {
	t.Parallel()
	rs, logs := newTestRingState(t)
	fp := rs.cfg.Fingerprint()
	// Nobody consumes: pushes must still return, and one wake-up stays pending.
	for i := range 1000 {
		rs.push(testMemberEvent(t, eventJoin, fmt.Sprintf("m%03d", i%10), Joining, fp))
	}
	if len(rs.signal) != 1 {
		t.Fatalf("signal holds %d wake-ups, want 1", len(rs.signal))
	}
	r := rs.runOnce()
	if r.Len() != 10 || r.Epoch() != 1 {
		t.Fatalf("ring of %d members at epoch %d, want 10 at 1", r.Len(), r.Epoch())
	}
	if got := logs.Count(`msg="ring rebuilt"`); got != 1 {
		t.Errorf("%d rebuilds for one batch, want 1", got)
	}
}

func TestMembershipRefusalIsLoggedOncePerPeer(t *testing.T) {
	t.Parallel()
	rs, logs := newTestRingState(t)
	for range 100 {
		rs.refuse("odd", "10.0.0.9:7946", "ring settings differ: x")
	}
	rs.runOnce()
	rs.refuse("odd", "10.0.0.9:7946", "ring settings differ: y") // a new reason is news
	rs.runOnce()
	rs.push(testMemberEvent(t, eventJoin, "odd", Joining, rs.cfg.Fingerprint())) // accepted after a fix ...
	rs.refuse("odd", "10.0.0.9:7946", "ring settings differ: y")                 // ... and refused again later
	rs.runOnce()
	if got := logs.Count(`msg="refusing peer`, "peer=odd", "level=ERROR", "local_settings="); got != 3 {
		t.Errorf("logged %d refusals, want 3", got)
	}
}

func TestMembershipDelegateRefusesMismatchedPeers(t *testing.T) {
	t.Parallel()
	rs, _ := newTestRingState(t)
	fp := rs.cfg.Fingerprint()
	cfg := Config{Ring: rs.cfg, Versions: DefaultVersions()}
	d := memberDelegate{rs: rs, local: cfg.compat()}
	node := func(name string, meta []byte, state memberlist.NodeStateType) *memberlist.Node {
		return &memberlist.Node{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Meta: meta, State: state}
	}
	good := testMemberEvent(t, eventJoin, "b", Active, fp).meta
	other := testMemberEvent(t, eventJoin, "b", Active, "0123456789abcdef").meta
	newer := append([]byte{2}, good[1:]...)

	if err := d.NotifyAlive(node("b", good, memberlist.StateAlive)); err != nil {
		t.Fatalf("matching peer refused: %v", err)
	}
	for name, n := range map[string]*memberlist.Node{
		"different fingerprint": node("b", other, memberlist.StateAlive),
		"newer meta version":    node("b", newer, memberlist.StateAlive),
		"no meta":               node("b", nil, memberlist.StateAlive),
		"id differs from name":  node("c", good, memberlist.StateAlive),
	} {
		if err := d.NotifyAlive(n); !errors.Is(err, errPeerRefused) {
			t.Errorf("%s: NotifyAlive = %v, want errPeerRefused", name, err)
		}
	}
	err := d.NotifyAlive(node("b", other, memberlist.StateAlive))
	if want := fmt.Sprintf("peer fingerprint 0123456789abcdef, local fingerprint %s", fp); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("refusal %q does not name both fingerprints", err)
	}

	if err := d.NotifyMerge([]*memberlist.Node{node("b", good, memberlist.StateAlive), node("x", other, memberlist.StateDead)}); err != nil {
		t.Errorf("merge refused over a dead member: %v", err)
	}
	if err := d.NotifyMerge([]*memberlist.Node{node("b", good, memberlist.StateAlive), node("x", other, memberlist.StateSuspect)}); !errors.Is(err, errPeerRefused) {
		t.Errorf("merge with a mismatched live member: %v, want errPeerRefused", err)
	}
}

// TestTheSettleWindowBoundsUnsettledReads: reads ask non-owners for the
// configured window after a node starts or its ring changes, and never with a
// negative window. Time comes from an injected clock.
func TestTheSettleWindowBoundsUnsettledReads(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		window     time.Duration
		now, later bool
	}{{time.Hour, true, true}, {300 * time.Millisecond, true, false}, {-1, false, false}} {
		clock := time.Unix(1000, 0)
		now := func() time.Time { return clock }
		rs, err := newRingState(ring.DefaultConfig(), DefaultVersions(), "a", c.window, now, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if got := rs.unsettled(); got != c.now {
			t.Fatalf("window %v: unsettled %v at start, want %v", c.window, got, c.now)
		}
		clock = clock.Add(299 * time.Millisecond)
		if got := rs.unsettled(); got != c.now {
			t.Fatalf("window %v: unsettled %v 299ms after start, want %v", c.window, got, c.now)
		}
		clock = clock.Add(101 * time.Millisecond)
		if got := rs.unsettled(); got != c.later {
			t.Fatalf("window %v: unsettled %v 400ms after start, want %v", c.window, got, c.later)
		}
		// A ring change opens the window again.
		rs.push(testMemberEvent(t, eventJoin, "a", Active, ring.DefaultConfig().Fingerprint()))
		rs.runOnce()
		if got := rs.unsettled(); got != c.now {
			t.Fatalf("window %v: unsettled %v right after a ring change, want %v", c.window, got, c.now)
		}
	}
}

// TestAForgottenMemberIsListedAsForgottenUntilItJoinsAgain: after Forget a
// member is listed with Forgotten set (and owns nothing), whether gossip
// still calls it alive or dead; once it joins again it is not forgotten.
func TestAForgottenMemberIsListedAsForgottenUntilItJoinsAgain(t *testing.T) {
	t.Parallel()
	rs, _ := newTestRingState(t)
	m := &Membership{cfg: Config{NodeID: "a"}, rs: rs}
	fp := rs.cfg.Fingerprint()
	for _, id := range []string{"a", "b", "c"} {
		rs.push(testMemberEvent(t, eventJoin, id, Active, fp))
	}
	rs.runOnce()
	forgotten := func() map[string]bool {
		out := map[string]bool{}
		for _, mb := range rs.members() {
			out[mb.ID] = mb.Forgotten
		}
		return out
	}
	rs.push(testMemberEvent(t, eventLeave, "c", Active, fp)) // killed: gossip declares it dead
	rs.runOnce()
	if err := m.Forget("c"); err != nil {
		t.Fatal(err)
	}
	if got := forgotten(); !got["c"] || got["a"] || got["b"] || livenessOf(rs, "c") != Dead {
		t.Fatalf("after forgetting dead c: forgotten %v, c %v", got, livenessOf(rs, "c"))
	}
	if err := m.Forget("b"); err != nil { // alive (kvring forget --force)
		t.Fatal(err)
	}
	if got := forgotten(); !got["b"] || slices.ContainsFunc(rs.ring().Members(), func(r ring.Member) bool { return r.ID == "b" }) {
		t.Fatalf("after forgetting alive b: forgotten %v, ring %v", got, rs.ring().Members())
	}
	rs.push(testMemberEvent(t, eventJoin, "c", Active, fp)) // c restarts and joins
	rs.runOnce()
	if got := forgotten(); got["c"] || !got["b"] {
		t.Fatalf("after c joined again: forgotten %v", got)
	}
}
