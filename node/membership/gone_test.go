package membership

import (
	"slices"
	"testing"
	"time"
)

// TestAMemberIsGoneWhenDeclaredDeadLeftOrRestarted: OnMemberGone names a
// member once gossip declared it dead, it left, or it came back with another
// boot time (a restart that beat the failure detector): each ends the
// process that made its earlier calls. A state change, a rejoin after its
// death was already reported, and this node itself never do (a suspicion
// reaches the ring state as no event at all).
func TestAMemberIsGoneWhenDeclaredDeadLeftOrRestarted(t *testing.T) {
	t.Parallel()
	rs, _ := newTestRingState(t)
	fp := rs.cfg.Fingerprint()
	var gone []string
	rs.onGone = func(id string) { gone = append(gone, id) }
	ev := func(kind memberEventKind, id string, s State, boot int64) {
		e := testMemberEvent(t, kind, id, s, fp)
		b, err := nodeMeta{NodeID: id, GRPCAddr: id + ":9600", AdminAddr: id + ":9602", State: s,
			BootTime: time.UnixMilli(boot), Fingerprint: fp}.encode()
		if err != nil {
			t.Fatal(err)
		}
		e.meta = b
		rs.push(e)
	}
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"four join", func() {
			for _, id := range []string{"a", "b", "c", "d"} {
				ev(eventJoin, id, Joining, 1)
			}
		}, nil},
		{"b becomes active", func() { ev(eventUpdate, "b", Active, 1) }, nil},
		{"c is declared dead", func() { ev(eventLeave, "c", Active, 1) }, []string{"c"}},
		{"c joins again", func() { ev(eventJoin, "c", Joining, 2) }, nil},
		{"d restarted before it was found dead", func() { ev(eventUpdate, "d", Joining, 2) }, []string{"d"}},
		{"b leaves", func() { ev(eventUpdate, "b", Leaving, 1); ev(eventLeave, "b", Leaving, 1) }, []string{"b"}},
		{"b's departure is heard again", func() { ev(eventLeave, "b", Leaving, 1) }, nil},
		{"this node restarts", func() { ev(eventUpdate, "a", Active, 3) }, nil},
	}
	for _, s := range steps {
		gone = nil
		s.do()
		rs.runOnce()
		if !slices.Equal(gone, s.want) {
			t.Fatalf("%s: gone %v, want %v", s.name, gone, s.want)
		}
	}
}
