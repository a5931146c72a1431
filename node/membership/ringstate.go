package membership

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvring/kvring/node/internal/moves"
	"github.com/kvring/kvring/ring"
)

// Liveness is gossip's view of a member.
//
// memberlist v0.7.0 does not expose its "suspect" state (Members lists suspects as alive and no callback
// reports them), so a suspect member shows as alive until it is declared dead.
type Liveness uint8

const (
	// Alive: gossip reaches the member (or has not yet given up on it).
	Alive Liveness = iota + 1
	// Dead: the member stopped answering and was declared dead without announcing that it leaves.
	Dead
	// Left: the member announced that it leaves (state leaving), then left.
	Left
)

// String returns "alive", "dead", "left" or "liveness(N)".
func (l Liveness) String() string {
	switch l {
	case Alive:
		return "alive"
	case Dead:
		return "dead"
	case Left:
		return "left"
	}
	return "liveness(" + strconv.Itoa(int(l)) + ")"
}

// MarshalText makes Liveness print as its name in JSON.
func (l Liveness) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// Member describes a member as this node last heard of it.
type Member struct {
	ID         string // node id (ring member ID)
	GRPCAddr   string // gRPC address (ring member Addr)
	AdminAddr  string // admin HTTP address
	RESPAddr   string // Redis-protocol address ("": off)
	State      State  // the member's own state, from its metadata
	HandingOff bool   // it is moving chunks to their owners (from its metadata)
	// Moves is its hand-off summary (nil: it gossips none, an earlier
	// release).
	Moves      *moves.Summary `json:"-"`
	BootTime   time.Time      // when the member started gossiping
	GossipAddr string         // host:port of its gossip
	Liveness   Liveness
	Since      time.Time // when this node last saw it join, change or leave
	// Build is the member's version and commit, from its metadata (zero: a
	// build before v0.4.0, which gossips none).
	Build Build
	// Versions are the versions it supports (placement 2 and wire 1 for a
	// build before v0.4.0, which gossips none).
	Versions Versions
	// Forgotten: an operator removed it from this node's ring
	// (Membership.Forget); it owns nothing here until it joins again.
	Forgotten bool
}

// ownsPartitions decides who is a ring member: every alive member that is not leaving. A joining member owns
// partitions as soon as it gossips (there is no hand-off yet, so a joining member starts empty like any
// other); a draining member keeps owning what it holds until it announces leaving. Keep this the only place
// that decides ownership.
func ownsPartitions(m *Member) bool {
	return m.Liveness == Alive && m.State != Leaving
}

// deadMemberRetention is how long members() keeps listing a member after it died or left.
const deadMemberRetention = 10 * time.Minute

type memberEventKind uint8

const (
	eventJoin memberEventKind = iota + 1
	eventUpdate
	eventLeave
)

// memberEvent is a copy of what a memberlist callback reported; the callback's Node is not kept.
type memberEvent struct {
	kind       memberEventKind
	name       string
	gossipAddr string
	meta       []byte
}

// peerRefusal records that a peer was refused, for the ring goroutine to log.
type peerRefusal struct {
	peer, gossipAddr, reason string
}

// ringState turns membership events into ring snapshots. memberlist callbacks hand events over with push
// and refuse, which never block; one goroutine (loop) or a test (runOnce) applies them to the member table
// and rebuilds the ring when its members change.
//
// Epoch: the first ring (empty, before Start) has epoch 0; every rebuild whose member list (IDs or gRPC
// addresses) differs from the current ring's gets the current epoch + 1. Epochs are local to this node:
// two nodes with the same members may be at different epochs; compare Members to compare views.
type ringState struct {
	cfg  ring.Config
	own  Versions // the versions this node supports
	self string
	log  *slog.Logger
	// settle is the unsettled window (Config.SettleWindow); <= 0: never unsettled.
	settle time.Duration
	// now is the clock of the settle window and of member timestamps (Config.Now).
	now func() time.Time

	// onDrain, if set before the loop starts, is called when the set of
	// draining members changes (Config.OnDrainingChange).
	onDrain func()
	// onChange, if set before the loop starts, is called after every rebuild with the replaced and the new
	// ring, from the goroutine that rebuilt (calls are serialised, in epoch order). It must not call runOnce.
	onChange func(old, new *ring.Ring)
	// onLost, if set before the loop starts, is called after events that took another member away (it left
	// or was declared dead) are applied, so what it does sees the member gone. It must not block.
	onLost func()
	// onGone, if set before the loop starts, is called with the id of every other member whose incarnation
	// ended: declared dead, left, or seen again with another boot time (it restarted before it was found
	// dead). Never for a mere suspicion. Called from the goroutine that applied the event, after the table
	// is updated; it must not block.
	onGone func(id string)

	cur       atomic.Pointer[ring.Ring]
	active    atomic.Pointer[ActiveVersions] // replaced by runOnce when it changes
	changedAt atomic.Int64                   // UnixNano of the last rebuild (or of newRingState)

	inMu     sync.Mutex // guards the hand-off fields below
	pending  []memberEvent
	refusals []peerRefusal
	refused  map[string]string // peer → reason last logged, so each refusal is logged once
	signal   chan struct{}     // capacity 1: coalesces wake-ups

	rebuildMu sync.Mutex // serialises runOnce

	tableMu sync.Mutex // guards table and forgotten
	table   map[string]*Member
	// forgotten holds the members an operator removed from the ring
	// (Membership.Forget): they own nothing until they join again.
	forgotten map[string]bool

	// draining holds the ids of alive members that are draining, replaced
	// (never changed) after each batch of events: writes skip them.
	draining atomic.Pointer[map[string]bool]
	// handingOff is whether some alive member gossips that it is moving
	// chunks to their owners; replaced by every rebuild.
	handingOff atomic.Bool
	// moves is the view of who may hold chunks of partitions they do not
	// own, on cur; replaced by every runOnce. history holds the rings this
	// node had lately, newest last, which the view needs to read summaries
	// computed on an earlier ring; guarded by rebuildMu.
	moves   atomic.Pointer[moves.View]
	history []*ring.Ring
}

// ringHistory is how many earlier rings a node keeps to read its peers'
// summaries by (each is about 4 bytes × partitions × replication).
const ringHistory = 6

func newRingState(cfg ring.Config, own Versions, self string, settle time.Duration, now func() time.Time, log *slog.Logger) (*ringState, error) {
	alone := ActiveVersions{Placement: own.Placement.Max, Wire: own.Wire.Max} // until it hears of others
	cfg.Placement = alone.Placement
	empty, err := ring.New(nil, 0, cfg)
	if err != nil {
		return nil, err
	}
	rs := &ringState{
		cfg: cfg, own: own, self: self, log: log, settle: settle, now: now,
		refused: make(map[string]string),
		signal:  make(chan struct{}, 1),
		table:   make(map[string]*Member),
	}
	rs.cur.Store(empty)
	rs.active.Store(&alone)
	rs.changedAt.Store(now().UnixNano())
	rs.moves.Store(moves.NewView(empty, func(uint64) *ring.Ring { return nil }, nil, time.Time{}))
	return rs, nil
}

// ring returns the current snapshot; never nil, never blocks.
func (rs *ringState) ring() *ring.Ring { return rs.cur.Load() }

// unsettled reports whether the ring changed, or this node started, less
// than the settle window (Config.SettleWindow) ago. While gossip
// converges, a coordinator whose ring is behind (or ahead) stores chunks where
// the converged ring does not look, and a node that just started cannot know
// the rings the others had. During the window a lookup asks every member about
// the ids past the run the owners hold, and a get falls back to every member.
// Reads stay unsettled after the window while some member gossips that it is
// handing chunks off (their owners do not hold them yet); the hand-off moves
// stray chunks to their owners.
func (rs *ringState) unsettled() bool {
	if rs.handingOff.Load() {
		return true
	}
	return rs.settle > 0 && rs.now().Sub(time.Unix(0, rs.changedAt.Load())) < rs.settle
}

func (rs *ringState) push(ev memberEvent) {
	rs.inMu.Lock()
	rs.pending = append(rs.pending, ev)
	if ev.kind == eventJoin {
		delete(rs.refused, ev.name) // refused before, accepted now: log a later refusal again
	}
	rs.inMu.Unlock()
	rs.wake()
}

// refuse records a refused peer; only a new (peer, reason) pair is handed on for logging. Never blocks.
func (rs *ringState) refuse(peer, gossipAddr, reason string) {
	rs.inMu.Lock()
	if rs.refused[peer] == reason {
		rs.inMu.Unlock()
		return
	}
	rs.refused[peer] = reason
	rs.refusals = append(rs.refusals, peerRefusal{peer: peer, gossipAddr: gossipAddr, reason: reason})
	rs.inMu.Unlock()
	rs.wake()
}

func (rs *ringState) wake() {
	select {
	case rs.signal <- struct{}{}:
	default:
	}
}

// loop runs runOnce whenever events arrive, until ctx ends.
func (rs *ringState) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-rs.signal:
			rs.runOnce()
		}
	}
}

// runOnce applies the pending events, logs them, and rebuilds the ring if its members or the placement version
// every member supports changed. It returns the current ring. Safe to call from any goroutine (tests call it to rebuild synchronously).
func (rs *ringState) runOnce() *ring.Ring {
	rs.rebuildMu.Lock()
	defer rs.rebuildMu.Unlock()

	rs.inMu.Lock()
	events, refusals := rs.pending, rs.refusals
	rs.pending, rs.refusals = nil, nil
	rs.inMu.Unlock()

	rs.logRefusals(refusals)
	now := rs.now()
	rs.tableMu.Lock()
	lost, gone := rs.applyAll(events, now)
	for id, m := range rs.table {
		if m.Liveness != Alive && now.Sub(m.Since) > deadMemberRetention {
			delete(rs.table, id)
		}
	}
	draining := map[string]bool{}
	handingOff := false
	for _, m := range rs.table {
		if m.Liveness == Alive && m.State == Draining {
			draining[m.ID] = true
		}
		handingOff = handingOff || (m.Liveness == Alive && m.HandingOff)
	}
	was := rs.draining.Load()
	drainChanged := (was == nil && len(draining) > 0) || (was != nil && !maps.Equal(*was, draining))
	rs.draining.Store(&draining)
	rs.handingOff.Store(handingOff)
	var owners []ring.Member
	var entries []moves.Entry
	var supported []Versions
	for _, m := range rs.table {
		if m.Liveness == Alive && !rs.forgotten[m.ID] {
			supported = append(supported, m.Versions)
		}
		if ownsPartitions(m) && !rs.forgotten[m.ID] {
			owners = append(owners, ring.Member{ID: m.ID, Addr: m.GRPCAddr})
			entries = append(entries, moves.Entry{Member: owners[len(owners)-1], Summary: m.Moves, HandingOff: m.HandingOff})
		}
	}
	rs.tableMu.Unlock()
	defer func() { rs.updateMoves(entries) }()
	for _, id := range gone {
		if rs.onGone != nil {
			rs.onGone(id)
		}
	}
	if lost && rs.onLost != nil {
		rs.onLost()
	}
	if drainChanged && rs.onDrain != nil {
		rs.onDrain() // a drained member's chunks move, or come back, without a ring change
	}

	return rs.rebuild(owners, supported, now)
}

// rebuild replaces the ring when its members (owners) or the placement
// version every member supports changed, and returns the current ring.
// rebuildMu is held.
func (rs *ringState) rebuild(owners []ring.Member, supported []Versions, now time.Time) *ring.Ring {
	slices.SortFunc(owners, func(a, b ring.Member) int { return cmp.Compare(a.ID, b.ID) })
	cfg := rs.cfg
	cfg.Placement = rs.updateActive(supported).Placement
	old := rs.cur.Load()
	if slices.Equal(old.Members(), owners) && old.Config() == cfg {
		return old
	}
	next, err := ring.New(owners, old.Epoch()+1, cfg)
	if err != nil {
		rs.log.Error("cannot rebuild ring; keeping the previous one", "epoch", old.Epoch(),
			"members", memberIDs(owners), "err", err)
		return old
	}
	rs.history = append(rs.history, old)
	if len(rs.history) > ringHistory {
		rs.history = rs.history[1:]
	}
	rs.cur.Store(next)
	rs.changedAt.Store(now.UnixNano())
	rs.log.Info("ring rebuilt", "epoch", next.Epoch(), "members", memberIDs(owners),
		"moved", ring.Moved(old, next), "partitions", rs.cfg.PartitionCount, "placement", cfg.Placement)
	if rs.onChange != nil {
		rs.onChange(old, next)
	}
	return next
}

// updateActive computes the versions in use from those the alive members support (this node's own among
// them), stores them and logs a change. rebuildMu is held.
func (rs *ringState) updateActive(supported []Versions) ActiveVersions {
	a, conflict := activeOf(rs.own, supported)
	was := *rs.active.Load()
	if a == was {
		return a
	}
	rs.active.Store(&a)
	if conflict {
		rs.log.Error("members have no version in common: some of them refuse each other; using the lowest maximum",
			"placement", a.Placement, "wire", a.Wire, "supported_here", rs.own.String())
	}
	rs.log.Info("cluster versions changed: every member supports these", "placement", a.Placement, "wire", a.Wire,
		"was_placement", was.Placement, "was_wire", was.Wire, "members", len(supported))
	return a
}

// updateMoves replaces the view of who may hold chunks of partitions they
// do not own, from the members' summaries. rebuildMu is held.
func (rs *ringState) updateMoves(entries []moves.Entry) {
	known := map[uint64]*ring.Ring{}
	for _, r := range rs.history {
		known[moves.RingHash(r)] = r
	}
	var until time.Time
	if rs.settle > 0 {
		until = time.Unix(0, rs.changedAt.Load()).Add(rs.settle)
	}
	rs.moves.Store(moves.NewView(rs.cur.Load(), func(h uint64) *ring.Ring { return known[h] }, entries, until))
}

// logRefusals logs the peers refused since the last run.
func (rs *ringState) logRefusals(refusals []peerRefusal) {
	for _, r := range refusals {
		rs.log.Error("refusing peer: it cannot join this cluster", "peer", r.peer, "peer_gossip", r.gossipAddr,
			"reason", r.reason, "local_versions", rs.own.String(), "local_settings", rs.cfg.SettingsFingerprint(), "local_ring", fmt.Sprintf(
				"partitions=%d replication=%d load=%g vnodes=%d hasher=%s", rs.cfg.PartitionCount,
				rs.cfg.ReplicationFactor, rs.cfg.Load, rs.cfg.VirtualNodes, rs.cfg.Hasher))
	}
}

// applyAll applies events to the table and reports whether one took
// another member away (it left or was declared dead) and the other members
// whose incarnation ended (apply). tableMu is held.
func (rs *ringState) applyAll(events []memberEvent, now time.Time) (lost bool, gone []string) {
	for _, ev := range events {
		if rs.apply(ev, now) && ev.name != rs.self {
			gone = append(gone, ev.name)
		}
		lost = lost || (ev.kind == eventLeave && ev.name != rs.self)
	}
	return lost, gone
}

// apply updates the table with one event and logs it. It reports whether
// the event ended an incarnation of the member the table knew alive: it was
// declared dead or left, or it gossips another boot time (a restart).
// tableMu is held.
func (rs *ringState) apply(ev memberEvent, now time.Time) (ended bool) {
	meta, err := decodeMeta(ev.meta)
	if err != nil {
		// The alive delegate refuses such peers, so this is a peer that changed its metadata incompatibly.
		rs.log.Error("ignoring member event with unreadable metadata", "member", ev.name, "gossip", ev.gossipAddr, "err", err)
		return false
	}
	old, known := rs.table[ev.name]
	wasAlive := known && old.Liveness == Alive
	m := &Member{
		ID: ev.name, GRPCAddr: meta.GRPCAddr, AdminAddr: meta.AdminAddr, RESPAddr: meta.RESPAddr, State: meta.State,
		HandingOff: meta.HandingOff, BootTime: meta.BootTime, GossipAddr: ev.gossipAddr, Liveness: Alive, Since: now,
		Moves: meta.Moves, Build: meta.Build, Versions: legacyVersions(),
	}
	if meta.Versions != nil {
		m.Versions = *meta.Versions
	}
	attrs := []any{"member", m.ID, "grpc", m.GRPCAddr, "admin", m.AdminAddr, "gossip", m.GossipAddr,
		"state", m.State, "build", m.Build.String()}
	if m.ID == rs.self {
		attrs = append(attrs, "self", true)
	}
	switch ev.kind {
	case eventJoin:
		if rs.forgotten[m.ID] {
			delete(rs.forgotten, m.ID) // it joined again: it owns partitions again
		}
		rs.log.Info("member joined", attrs...)
	case eventUpdate:
		if known && !old.BootTime.Equal(m.BootTime) {
			delete(rs.forgotten, m.ID) // restarted: it owns partitions again
		}
		if !known {
			rs.log.Info("member joined", attrs...)
			break
		}
		if old.Liveness == Alive && old.State == m.State && old.GRPCAddr == m.GRPCAddr &&
			old.AdminAddr == m.AdminAddr && old.RESPAddr == m.RESPAddr && old.GossipAddr == m.GossipAddr && old.BootTime.Equal(m.BootTime) {
			if old.HandingOff != m.HandingOff || !sameMoves(old.Moves, m.Moves) {
				m.Since = old.Since
				rs.table[ev.name] = m // the hand-off summary changed: too frequent to log
			}
			return false
		}
		rs.log.Info("member updated", append(attrs, "old_state", old.State, "handing_off", m.HandingOff)...)
	case eventLeave:
		m.Liveness = Dead
		if m.State == Leaving || (known && old.State == Leaving) {
			m.Liveness = Left
		}
		rs.log.Info("member left", append(attrs, "liveness", m.Liveness)...)
		rs.table[ev.name] = m
		return wasAlive
	}
	rs.table[ev.name] = m
	return wasAlive && !old.BootTime.IsZero() && !old.BootTime.Equal(m.BootTime)
}

// members returns a copy of the member table sorted by ID: alive members, and members that died or left
// within deadMemberRetention.
func (rs *ringState) members() []Member {
	rs.tableMu.Lock()
	out := make([]Member, 0, len(rs.table))
	for _, m := range rs.table {
		c := *m
		c.Forgotten = rs.forgotten[m.ID]
		out = append(out, c)
	}
	rs.tableMu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// sameMoves reports whether two hand-off summaries say the same.
func sameMoves(a, b *moves.Summary) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

func memberIDs(ms []ring.Member) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}
