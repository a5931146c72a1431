package membership

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func testKey(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// TestMembershipRefusesMemberWithWrongGossipKey: two members with the same
// key form a cluster; a third with another key, and a fourth with none, try
// to join and are refused: neither is ever a member, and the cluster logs
// each host's refusal once, at ERROR, however often they retry.
func TestMembershipRefusesMemberWithWrongGossipKey(t *testing.T) {
	t.Parallel()
	key := testKey(1, 32)
	var ms []testMembership
	for i, id := range []string{"a", "b"} {
		cfg, logs := testMembershipConfig(t, id)
		cfg.Keys = [][]byte{key}
		if i > 0 {
			cfg.Join = []string{ms[0].GossipAddr()}
		}
		ms = append(ms, startTestMember(t, cfg, logs))
	}
	for _, m := range ms {
		waitForMembership(t, m.cfg.NodeID+" sees both", func() bool {
			return slices.Equal(aliveMemberIDs(m.Membership), []string{"a", "b"})
		})
	}

	for _, rogue := range []struct {
		id   string
		keys [][]byte
	}{{"wrongkey", [][]byte{testKey(2, 32)}}, {"nokey", nil}} {
		cfg, logs := testMembershipConfig(t, rogue.id)
		cfg.Keys = rogue.keys
		cfg.Join = []string{ms[0].GossipAddr()}
		cfg.RejoinInterval = 50 * time.Millisecond
		r := startTestMember(t, cfg, logs)
		waitForMembership(t, rogue.id+" retries", func() bool { return r.logs.Count(`msg="join attempt failed"`) >= 3 })
		if got := r.logs.Count(`msg="cannot join seeds`, "level=WARN"); got != 1 {
			t.Errorf("%s logged its failed join %d times at WARN, want once", rogue.id, got)
		}
		if ids := aliveMemberIDs(r.Membership); !slices.Equal(ids, []string{rogue.id}) {
			t.Errorf("%s counts members %v", rogue.id, ids)
		}
	}
	waitForMembership(t, "a logs the refusal", func() bool { return ms[0].logs.Count(`refusing gossip from a host`) > 0 })
	if got := ms[0].logs.Count(`refusing gossip from a host`, "level=ERROR", "host=127.0.0.1"); got != 1 {
		t.Errorf("a logged the refusal %d times, want once at ERROR:\n%s", got, ms[0].logs.Lines("refus"))
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
}

// TestMembershipRotatesGossipKeysWithoutASplit: during a rolling rotation
// (keyring.go) the members of two neighbouring steps always understand each
// other: [old] with [old, new], [old, new] with [new, old], [new, old] with
// [new].
func TestMembershipRotatesGossipKeysWithoutASplit(t *testing.T) {
	t.Parallel()
	oldKey, newKey := testKey(3, 16), testKey(4, 24)
	steps := [][][]byte{{oldKey}, {oldKey, newKey}, {newKey, oldKey}, {newKey}}
	for i := range 3 {
		ids := []string{fmt.Sprintf("s%d", i), fmt.Sprintf("s%d", i+1)}
		cfgA, logsA := testMembershipConfig(t, ids[0])
		cfgA.Keys = steps[i]
		a := startTestMember(t, cfgA, logsA)
		cfgB, logsB := testMembershipConfig(t, ids[1])
		cfgB.Keys = steps[i+1]
		cfgB.Join = []string{a.GossipAddr()}
		b := startTestMember(t, cfgB, logsB)
		for _, m := range []testMembership{a, b} {
			waitForMembership(t, m.cfg.NodeID+" sees both of steps "+ids[0]+" and "+ids[1], func() bool {
				return slices.Equal(aliveMemberIDs(m.Membership), ids)
			})
		}
	}
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	k16, k32 := base64.StdEncoding.EncodeToString(testKey(5, 16)), base64.StdEncoding.EncodeToString(testKey(6, 32))
	keys, err := ParseKeys([]byte("# primary first\n" + k32 + "\n\n  " + k16 + "  \n"))
	if err != nil || len(keys) != 2 || !bytes.Equal(keys[0], testKey(6, 32)) || !bytes.Equal(keys[1], testKey(5, 16)) {
		t.Fatalf("ParseKeys = %v, %v", keys, err)
	}
	for text, want := range map[string]string{
		"":                   "no gossip key",
		"not base64!\n":      "line 1 is not base64",
		k16 + "\nAAAA\n":     "line 2: want 16, 24 or 32 bytes, got 3",
		"# only a comment\n": "no gossip key",
	} {
		if _, err := ParseKeys([]byte(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseKeys(%q) = %v, want an error containing %q", text, err, want)
		}
	}
	if _, err := New(Config{NodeID: "x", Keys: [][]byte{testKey(1, 7)}}); err == nil || !strings.Contains(err.Error(), "gossip key 0") {
		t.Errorf("New with a 7-byte key: %v", err)
	}
}
