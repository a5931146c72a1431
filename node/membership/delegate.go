package membership

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/hashicorp/memberlist"

	"github.com/kvring/kvring/ring"
)

// errPeerRefused is wrapped by the errors the alive and merge delegates return for a peer that cannot join.
var errPeerRefused = errors.New("kvring: peer refused")

// memberDelegate adapts memberlist's callbacks (Delegate, EventDelegate, AliveDelegate, MergeDelegate) to the
// membership. memberlist calls them from its network goroutines, some while it holds its own locks, so every
// method must not block: it copies what it keeps (memberlist may reuse the Node), takes at most a short
// mutex of ours, hands the rest to the ring goroutine (ringState.push / refuse), and never calls back into
// memberlist.
type memberDelegate struct {
	meta  *localMeta
	rs    *ringState
	local compat // what a peer must agree with
	// suspects, when set, forgets a member's failed probes when it joins
	// (again: after it was declared dead, as when a partition heals).
	suspects *suspectSet
}

var (
	_ memberlist.Delegate      = memberDelegate{}
	_ memberlist.EventDelegate = memberDelegate{}
	_ memberlist.AliveDelegate = memberDelegate{}
	_ memberlist.MergeDelegate = memberDelegate{}
)

// NodeMeta returns this node's encoded metadata; its size was checked against the limit by validate.
func (d memberDelegate) NodeMeta(limit int) []byte {
	b := d.meta.encoded()
	if len(b) > limit {
		return nil // BUG guard: memberlist panics on oversized metadata; peers will refuse us instead
	}
	return b
}

// NotifyMsg, GetBroadcasts, LocalState and MergeRemoteState are unused: kvring sends no user messages.
func (memberDelegate) NotifyMsg([]byte)                {}
func (memberDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (memberDelegate) LocalState(bool) []byte          { return nil }
func (memberDelegate) MergeRemoteState([]byte, bool)   {}

// NotifyJoin, NotifyLeave and NotifyUpdate hand a copy of the event to the ring goroutine.
func (d memberDelegate) NotifyJoin(n *memberlist.Node) {
	if d.suspects != nil {
		d.suspects.probeAnswered(n.Name)
	}
	d.rs.push(copyEvent(eventJoin, n))
}
func (d memberDelegate) NotifyLeave(n *memberlist.Node)  { d.rs.push(copyEvent(eventLeave, n)) }
func (d memberDelegate) NotifyUpdate(n *memberlist.Node) { d.rs.push(copyEvent(eventUpdate, n)) }

func copyEvent(kind memberEventKind, n *memberlist.Node) memberEvent {
	return memberEvent{kind: kind, name: n.Name, gossipAddr: n.Address(), meta: bytes.Clone(n.Meta)}
}

// NotifyAlive refuses a peer whose metadata is unreadable or names another node, whose ring settings
// differ from ours, or that has no version in common with us for some versioned part (versions.go), so it
// never enters memberlist's member list. memberlist calls it for every alive message
// (each gossip round); the refusal is logged once per peer and reason by the ring goroutine.
func (d memberDelegate) NotifyAlive(peer *memberlist.Node) error { return d.admit(peer) }

// NotifyMerge refuses a join (ours or a peer's) when an alive member of the other side would be refused, so
// the joining node gets an error naming both builds and what differs instead of a silent empty join. Every refused
// member is recorded (and logged once), not just the first.
func (d memberDelegate) NotifyMerge(peers []*memberlist.Node) error {
	var first error
	for _, p := range peers {
		if p.State != memberlist.StateAlive && p.State != memberlist.StateSuspect {
			continue
		}
		if err := d.admit(p); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (d memberDelegate) admit(n *memberlist.Node) error {
	meta, err := decodeMeta(n.Meta)
	var reason string
	switch {
	case err != nil:
		reason = err.Error()
	case meta.NodeID != n.Name:
		reason = fmt.Sprintf("metadata names node %q but gossip names it %q", meta.NodeID, n.Name)
	default:
		if reason = d.local.refusal(meta); reason == "" {
			return nil
		}
		reason += fmt.Sprintf("; peer build %s, local build %s", meta.Build, d.local.build)
	}
	d.rs.refuse(n.Name, n.Address(), reason)
	return fmt.Errorf("%w %q: %s", errPeerRefused, n.Name, reason)
}

// compat is what this node compares a peer's metadata with before it admits it.
type compat struct {
	build    Build
	settings string // ring.Config.SettingsFingerprint
	versions Versions
	// legacy is the full ring fingerprint at placement 2: what a build before v0.4.0 gossips when its
	// settings equal ours.
	legacy string
}

func (c *Config) compat() compat {
	r := c.Ring
	r.Placement = ring.PlacementV2
	return compat{build: c.Build, settings: c.Ring.SettingsFingerprint(), versions: c.Versions, legacy: r.Fingerprint()}
}

// refusal says why a peer cannot share a cluster with this node ("" when it can): its operator settings
// differ, or it has no version in common with this node for some versioned part.
func (c compat) refusal(peer nodeMeta) string {
	const settingsHelp = "(partition count, replication factor, load, virtual nodes and hasher must match cluster-wide)"
	if peer.Versions == nil { // a build before v0.4.0: placement 2, wire 1, and the full fingerprint at 2
		if part := c.versions.overlap(legacyVersions()); part != "" {
			return fmt.Sprintf("no %s version in common: the peer (a build before v0.4.0) supports %s, this node %s",
				part, legacyVersions(), c.versions)
		}
		if peer.Fingerprint != c.legacy {
			return fmt.Sprintf("ring settings differ: peer fingerprint %s, local fingerprint %s at placement 2 %s",
				peer.Fingerprint, c.legacy, settingsHelp)
		}
		return ""
	}
	if peer.Settings != c.settings {
		return fmt.Sprintf("ring settings differ: peer settings fingerprint %s, local settings fingerprint %s %s",
			peer.Settings, c.settings, settingsHelp)
	}
	if part := c.versions.overlap(*peer.Versions); part != "" {
		return fmt.Sprintf("no %s version in common: the peer supports %s, this node %s", part, *peer.Versions, c.versions)
	}
	return ""
}
