package membership

import (
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/kvring/kvring/ring"
)

func TestActiveVersionsAreTheHighestEveryMemberSupports(t *testing.T) {
	t.Parallel()
	cur, next := DefaultVersions(), RehearsalVersions()
	only3 := Versions{Placement: Range{3, 3}, Wire: Range{2, 2}}
	for _, tc := range []struct {
		name     string
		own      Versions
		all      []Versions
		want     ActiveVersions
		conflict bool
	}{
		{"alone", next, nil, ActiveVersions{3, 2}, false},
		{"a current member holds the rest back", next, []Versions{next, cur, next}, ActiveVersions{2, 1}, false},
		{"every member has the next", next, []Versions{next, next}, ActiveVersions{3, 2}, false},
		{"a current node among next ones", cur, []Versions{next, next}, ActiveVersions{2, 1}, false},
		{"no common version", next, []Versions{cur, only3}, ActiveVersions{2, 1}, true},
	} {
		got, conflict := activeOf(tc.own, tc.all)
		if got != tc.want || conflict != tc.conflict {
			t.Errorf("%s: activeOf = %+v, conflict %v; want %+v, %v", tc.name, got, conflict, tc.want, tc.conflict)
		}
	}
}

// versionedMeta is a v0.4.0-style metadata of peer id: its build, settings and versions.
func versionedMeta(t *testing.T, id string, cfg ring.Config, v Versions, build Build) []byte {
	t.Helper()
	c := Config{Ring: cfg, Versions: v}
	b, err := nodeMeta{NodeID: id, GRPCAddr: id + ":9600", State: Active, BootTime: time.UnixMilli(1),
		Fingerprint: c.legacyFingerprint(), Build: build, Settings: cfg.SettingsFingerprint(), Versions: &v}.encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPeersWithNoVersionInCommonAreRefusedNamingBothBuilds: a peer one
// version ahead is admitted by a current node and the other way round; a
// peer with no placement (or wire) version in common, or other operator
// settings, is refused, and the reason names both builds and both ranges. A
// build before v0.4.0 (no versions gossiped) is admitted when its full
// fingerprint matches ours at placement 2, and refused by a node that no
// longer supports placement 2.
func TestPeersWithNoVersionInCommonAreRefusedNamingBothBuilds(t *testing.T) {
	t.Parallel()
	rs, logs := newTestRingState(t)
	cfg := rs.cfg
	here := Build{Version: "v0.4.0", Commit: "aaaaaaaaaaaa"}
	local := Config{Ring: cfg, Versions: DefaultVersions(), Build: here}
	d := memberDelegate{rs: rs, local: local.compat()}
	node := func(meta []byte) *memberlist.Node {
		return &memberlist.Node{Name: "b", Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Meta: meta, State: memberlist.StateAlive}
	}
	next := Build{Version: "v0.5.0", Commit: "bbbbbbbbbbbb"}
	if err := d.NotifyAlive(node(versionedMeta(t, "b", cfg, RehearsalVersions(), next))); err != nil {
		t.Fatalf("a peer one version ahead refused: %v", err)
	}
	ahead := Config{Ring: cfg, Versions: RehearsalVersions(), Build: next}
	if err := (memberDelegate{rs: rs, local: ahead.compat()}).NotifyAlive(node(versionedMeta(t, "b", cfg, DefaultVersions(), here))); err != nil {
		t.Fatalf("a node one version ahead refused a current peer: %v", err)
	}
	legacy := testMemberEvent(t, eventJoin, "b", Active, local.legacyFingerprint()).meta
	if err := d.NotifyAlive(node(legacy)); err != nil {
		t.Fatalf("a build before v0.4.0 with the same settings refused: %v", err)
	}

	far := Build{Version: "v0.6.0", Commit: "cccccccccccc"}
	onlyNext := Versions{Placement: Range{3, 3}, Wire: Range{1, 2}}
	other := cfg
	other.VirtualNodes++
	for name, tc := range map[string]struct {
		d     memberDelegate
		meta  []byte
		wants []string
	}{
		"no placement version in common": {d, versionedMeta(t, "b", cfg, onlyNext, far),
			[]string{"no placement version in common", "placement 3, wire 1-2", "placement 2, wire 1", "peer build v0.6.0 (cccccccccccc), local build v0.4.0 (aaaaaaaaaaaa)"}},
		"no wire version in common": {d, versionedMeta(t, "b", cfg, Versions{Placement: Range{2, 3}, Wire: Range{2, 2}}, far),
			[]string{"no wire version in common", "peer build v0.6.0"}},
		"settings differ": {d, versionedMeta(t, "b", other, DefaultVersions(), here),
			[]string{"ring settings differ", other.SettingsFingerprint(), cfg.SettingsFingerprint()}},
		"a build before v0.4.0 and a node past placement 2": {
			memberDelegate{rs: rs, local: (&Config{Ring: cfg, Versions: onlyNext, Build: far}).compat()}, legacy,
			[]string{"no placement version in common", "a build before v0.4.0", "peer build before v0.4.0, local build v0.6.0"}},
	} {
		err := tc.d.NotifyAlive(node(tc.meta))
		if !errors.Is(err, errPeerRefused) {
			t.Errorf("%s: NotifyAlive = %v, want errPeerRefused", name, err)
			continue
		}
		for _, w := range tc.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: refusal %q lacks %q", name, err, w)
			}
		}
	}
	rs.runOnce()
	if n := logs.Count(`msg="refusing peer: it cannot join this cluster"`, "peer build v0.6.0 (cccccccccccc), local build v0.4.0 (aaaaaaaaaaaa)"); n == 0 {
		t.Errorf("no refusal logged naming both builds:\n%s", logs)
	}
}

// TestTheRingSwitchesPlacementOnceEveryMemberCan: a node that supports
// placement 2-3 builds its ring with 2 while a current member is alive,
// with 3 once the last one is gone (a ring change of its own: a new epoch),
// and steps back to 2 when a current member joins again (a downgrade).
func TestTheRingSwitchesPlacementOnceEveryMemberCan(t *testing.T) {
	t.Parallel()
	cfg := ring.DefaultConfig()
	cfg.PartitionCount = 257
	rs, err := newRingState(cfg, RehearsalVersions(), "a", time.Minute, time.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	join := func(id string, v Versions) {
		rs.push(memberEvent{kind: eventJoin, name: id, gossipAddr: id + ":7946", meta: versionedMeta(t, id, cfg, v, Build{Version: "x"})})
	}
	leave := func(id string, v Versions) {
		rs.push(memberEvent{kind: eventLeave, name: id, gossipAddr: id + ":7946", meta: versionedMeta(t, id, cfg, v, Build{Version: "x"})})
	}
	check := func(step string, placement, members int) *ring.Ring {
		t.Helper()
		r := rs.runOnce()
		if got := r.Config().Placement; got != placement || r.Len() != members {
			t.Fatalf("%s: ring of %d members with placement %d, want %d members with %d", step, r.Len(), got, members, placement)
		}
		if a := *rs.active.Load(); a.Placement != placement {
			t.Fatalf("%s: active %+v, want placement %d", step, a, placement)
		}
		return r
	}
	join("a", RehearsalVersions())
	check("alone", ring.PlacementV3, 1)
	join("b", DefaultVersions())
	join("c", RehearsalVersions())
	check("a current member joined", ring.PlacementV2, 3)
	leave("b", DefaultVersions())
	join("b", RehearsalVersions()) // upgraded
	before := rs.ring()
	r := check("the last current member upgraded", ring.PlacementV3, 3)
	if r.Epoch() <= before.Epoch() || ring.Moved(before, r) == 0 {
		t.Fatalf("switch: epoch %d -> %d, %d partitions moved", before.Epoch(), r.Epoch(), ring.Moved(before, r))
	}
	leave("c", RehearsalVersions())
	join("c", DefaultVersions()) // downgraded
	check("a current member joined again", ring.PlacementV2, 3)
}
