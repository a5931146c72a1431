package membership

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/kvring/kvring/node/internal/moves"
	"github.com/kvring/kvring/ring"
)

// Membership runs gossip membership (hashicorp/memberlist) and keeps the ring built from it.
//
// Lifecycle: New validates and does no I/O; Start binds gossip, joins the seeds and starts three
// goroutines (the ring goroutine, the reach check of reach.go and the rejoin loop); Close announces leaving,
// leaves, shuts gossip down and waits for them. ring and members never block. Methods are safe for concurrent use.
//
// The node gossips its metadata (nodeMeta): id, gRPC and admin addresses, state, boot time and ring
// fingerprint. It starts in Joining; SetState moves it on and tells the peers.
type Membership struct {
	cfg Config
	log *slog.Logger

	meta localMeta
	rs   *ringState
	ml   atomic.Pointer[memberlist.Memberlist] // set by start
	// gossipBytes counts the gossip bytes this node put on the wire
	// (countingTransport).
	gossipBytes atomic.Uint64
	addr        atomic.Pointer[string] // advertised gossip address, set by start

	suspects  suspectSet  // members gossip does not hold alive (Suspect)
	reach     chan string // members whose direct ping failed, for reachLoop (reach.go)
	reachBusy atomic.Bool // reachLoop is checking a member: its pings' lines are not queued
	// wrapTransport, when set (by tests, before Start), wraps the gossip transport memberlist would make
	// itself: an in-process network that can drop what one member sends another.
	wrapTransport func(memberlist.Transport) memberlist.Transport

	lifeMu   sync.Mutex // serialises start, setState and close; guards the fields below
	started  bool
	closed   bool
	closeErr error
	cancel   context.CancelFunc // stops the goroutines
	wg       sync.WaitGroup
	bindPort int

	// lost wakes the rejoin loop when a member left or was declared dead (ringState.onLost, once the ring
	// goroutine has applied it, so the round sees the member gone).
	lost chan struct{}

	joinMu      sync.Mutex // guards the join bookkeeping below
	joinFailing bool       // the last join attempt failed (its first failure was logged)
	joinedOnce  bool
}

// New checks cfg and returns a membership that is not started. It does no I/O.
func New(cfg Config) (*Membership, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Join = slices.Clone(cfg.Join)
	rs, err := newRingState(cfg.Ring, cfg.Versions, cfg.NodeID, cfg.SettleWindow, cfg.Now, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("invalid membership configuration: %w", err)
	}
	m := &Membership{cfg: cfg, log: cfg.Logger, rs: rs, lost: make(chan struct{}, 1), reach: make(chan string, reachQueue)}
	m.suspects.lapse = cfg.Timing.longestSuspicion()
	// Until its first hand-off pass, the node may hold chunks of any
	// partition (its catalog from before a restart): readers ask it about all.
	unknown := moves.Unknown()
	if err := m.meta.set(nodeMeta{NodeID: cfg.NodeID, GRPCAddr: cfg.GRPCAddr, AdminAddr: cfg.AdminAddr,
		State: Joining, Fingerprint: cfg.legacyFingerprint(), RESPAddr: cfg.RESPAddr, Moves: &unknown,
		Build: cfg.Build, Settings: cfg.Ring.SettingsFingerprint(), Versions: &cfg.Versions}); err != nil {
		return nil, fmt.Errorf("invalid membership configuration: %w", err)
	}
	return m, nil
}

// Start binds gossip, joins the seeds and starts the ring and rejoin goroutines. A seed that cannot be
// reached is not an error: the failure is logged once and joining is retried in the background. When Start
// returns, the ring holds this node and whatever the seeds reported. It blocks for at most about
// Timing.TCPTimeout per unreachable seed address.
func (m *Membership) Start(ctx context.Context) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.started || m.closed {
		return errors.New("membership: start called twice or after close")
	}
	m.started = true

	bind, err := parseBindAddr(m.cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("cannot start gossip: %w", err)
	}
	advIP, advPort, err := m.cfg.advertiseIP(ctx, bind)
	if err != nil {
		return fmt.Errorf("cannot start gossip: %w", err)
	}
	if advIP.IsLoopback() && !bind.Addr().IsLoopback() {
		m.log.Warn("advertising a loopback gossip address: peers on other hosts cannot reach this node; set the advertise address",
			"advertise", advIP.String())
	}
	if err := m.meta.setBootTime(m.cfg.Now()); err != nil {
		return fmt.Errorf("cannot start gossip: %w", err)
	}

	mc, err := m.memberlistConfig(bind, advIP, advPort)
	if err != nil {
		return fmt.Errorf("cannot start gossip on %q: %w", m.cfg.GossipAddr, err)
	}
	m.rs.rebuildMu.Lock()
	m.rs.onChange = m.cfg.OnRingChange
	m.rs.onDrain = m.cfg.OnDrainingChange
	m.rs.onGone = m.cfg.OnMemberGone
	m.rs.onLost = func() {
		select {
		case m.lost <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
	m.rs.rebuildMu.Unlock()
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("cannot start gossip on %q: %w", m.cfg.GossipAddr, err)
	}
	m.ml.Store(ml)
	m.bindPort = mc.BindPort // memberlist fills in the port it picked for port 0
	// Read the local node once: memberlist rewrites the Node that LocalNode and Members point to under its
	// own lock, so reading it later from our goroutines would race.
	addr := ml.LocalNode().Address()
	m.addr.Store(&addr)

	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	m.wg.Go(func() { m.rs.loop(loopCtx) })
	m.wg.Go(func() { m.reachLoop(loopCtx) })
	m.rs.runOnce() // this node is a member now: seeds that name it need no join
	if len(m.cfg.Join) > 0 && ctx.Err() == nil {
		m.rejoinOnce(ctx)
	}
	r := m.rs.runOnce()
	m.log.Info("gossip started", "node", m.cfg.NodeID, "bind", net.JoinHostPort(mc.BindAddr, strconv.Itoa(mc.BindPort)),
		"advertise", addr, "seeds", m.cfg.Join, "members", ml.NumMembers(), "epoch", r.Epoch())
	if len(m.cfg.Join) > 0 {
		m.wg.Go(func() { m.rejoinLoop(loopCtx) })
	}
	return nil
}

// Close announces Leaving, leaves the cluster (waiting up to BroadcastTimeout, or ctx's deadline, for
// each message to reach a peer), shuts gossip down and waits for its goroutines; a join attempt in flight
// finishes first (at most Timing.TCPTimeout). Idempotent: later calls return the first call's result.
func (m *Membership) Close(ctx context.Context) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.closed {
		return m.closeErr
	}
	m.closed = true
	ml := m.ml.Load()
	if ml == nil {
		return nil
	}
	t := time.Now()
	m.cancel()
	m.wg.Wait()
	var errs []error
	if err := m.announce(ctx, ml, Leaving); err != nil {
		errs = append(errs, err)
	}
	if err := ml.Leave(m.broadcastTimeout(ctx)); err != nil {
		errs = append(errs, fmt.Errorf("cannot announce leave: %w", err))
	}
	if err := ml.Shutdown(); err != nil {
		errs = append(errs, fmt.Errorf("cannot shut gossip down: %w", err))
	}
	m.closeErr = errors.Join(errs...)
	m.log.Info("left cluster", "node", m.cfg.NodeID, "duration", time.Since(t).Round(time.Millisecond), "err", m.closeErr)
	return m.closeErr
}

// memberlistConfig is memberlist's configuration for this node: its name, addresses and timings, the
// delegates and the log writer that feed the ring goroutine and the suspect set.
func (m *Membership) memberlistConfig(bind netip.AddrPort, advIP netip.Addr, advPort uint16) (*memberlist.Config, error) {
	mc := memberlist.DefaultLANConfig()
	mc.Name = m.cfg.NodeID
	mc.BindAddr = bind.Addr().String()
	mc.BindPort = int(bind.Port())
	mc.AdvertiseAddr = advIP.String()
	mc.AdvertisePort = int(cmp.Or(advPort, bind.Port()))
	m.cfg.Timing.apply(mc)
	d := memberDelegate{meta: &m.meta, rs: m.rs, local: m.cfg.compat(), suspects: &m.suspects}
	mc.Delegate, mc.Events, mc.Alive, mc.Merge = d, d, d, d
	suspect := func(name string) { m.suspects.probeFailed(name, m.cfg.Now()) }
	mlog := memberlistLog{log: m.log.With("source", "memberlist"), suspect: suspect, pingFailed: m.queueReachCheck}
	mc.Logger = log.New(newKeyErrorLog(m.log, mlog), "", 0)
	mc.Ping = pingDelegate{&m.suspects}
	var err error
	if mc.Keyring, err = newKeyring(m.cfg.Keys); err != nil {
		return nil, err
	}
	mc.LogOutput = nil
	tr, err := newCountingTransport(mc.BindAddr, mc.BindPort, mc.Logger, &m.gossipBytes)
	if err != nil {
		return nil, err
	}
	if mc.BindPort == 0 { // as memberlist.Create does for the transport it makes
		mc.BindPort = tr.GetAutoBindPort()
		mc.AdvertisePort = mc.BindPort
	}
	mc.Transport = tr
	if m.wrapTransport != nil {
		mc.Transport = m.wrapTransport(tr)
	}
	return mc, nil
}

// SetState changes this node's state and gossips it, waiting up to BroadcastTimeout (or ctx's deadline) for
// the update to reach a peer; peers see it as "member updated" and rebuild their rings if ownership changed.
// Before Start or after Close it only changes the metadata.
func (m *Membership) SetState(ctx context.Context, s State) error {
	if !s.valid() {
		return fmt.Errorf("cannot set node state: unknown state %d", uint8(s))
	}
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	ml := m.ml.Load()
	if ml == nil || m.closed {
		return m.meta.setState(s)
	}
	return m.announce(ctx, ml, s)
}

// announce sets the state and broadcasts it. lifeMu is held.
func (m *Membership) announce(ctx context.Context, ml *memberlist.Memberlist, s State) error {
	if err := m.meta.setState(s); err != nil {
		return err
	}
	if err := ml.UpdateNode(m.broadcastTimeout(ctx)); err != nil {
		return fmt.Errorf("cannot announce state %s: %w", s, err)
	}
	return nil
}

// broadcastTimeout is BroadcastTimeout capped by ctx's deadline, and never 0 (memberlist waits forever then).
func (m *Membership) broadcastTimeout(ctx context.Context) time.Duration {
	t := m.cfg.BroadcastTimeout
	if dl, ok := ctx.Deadline(); ok {
		t = min(t, time.Until(dl))
	}
	return max(t, time.Millisecond)
}

// GossipBytes returns the gossip bytes this node has put on the wire since
// Start: the packets it sent and both directions of the streams it opened
// (summed over the members, each byte once). Never blocks.
func (m *Membership) GossipBytes() uint64 { return m.gossipBytes.Load() }

// SetMoves gossips the node's hand-off summary: the partitions in which it
// holds chunks it does not own, on the ring the summary names (readers ask
// it about those partitions besides their owners). It sets the "handing
// off" flag, which nodes of earlier releases read, when the summary names
// any partition. It waits like SetState; before Start or after Close it
// only changes the metadata.
func (m *Membership) SetMoves(ctx context.Context, s moves.Summary) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if err := m.meta.update(func(nm *nodeMeta) { nm.Moves, nm.HandingOff = &s, !s.Empty() }); err != nil {
		return err
	}
	ml := m.ml.Load()
	if ml == nil || m.closed {
		return nil
	}
	if err := ml.UpdateNode(m.broadcastTimeout(ctx)); err != nil {
		return fmt.Errorf("cannot announce the hand-off summary: %w", err)
	}
	return nil
}

// Moves returns what this node knows of the members that may hold chunks
// of partitions they do not own, on the current ring (see package moves).
// Never nil, never blocks.
func (m *Membership) Moves() *moves.View { return m.rs.moves.Load() }

// Active returns the versions this node uses now: for each part, the highest version every member supports.
// Never blocks.
func (m *Membership) Active() ActiveVersions { return *m.rs.active.Load() }

// Versions returns the versions this node supports (Config.Versions).
func (m *Membership) Versions() Versions { return m.cfg.Versions }

// Ring returns the current ring snapshot: never nil (empty at epoch 0 before Start), never blocks.
func (m *Membership) Ring() *ring.Ring { return m.rs.ring() }

// Unsettled reports whether reads should also ask non-owners: the ring
// changed, or this node started, recently (see Config.SettleWindow), or a
// member gossips that it hands chunks off (SetMoves). Reads go by the
// hand-off summaries instead (Moves); the Redis-protocol port and the status
// page still use this.
func (m *Membership) Unsettled() bool { return m.rs.unsettled() }

// Members returns a copy of the members this node knows, sorted by ID, this node included: alive ones, and
// ones that died or left in the last 10 minutes.
func (m *Membership) Members() []Member { return m.rs.members() }

// Forget removes member id from this node's ring at once, instead of
// waiting for gossip to declare it dead: it owns nothing here until it joins
// the cluster again (a restart). The ring is rebuilt before Forget returns.
// It refuses this node itself and a member it does not know. It does not
// tell other members: the caller asks each (kvring forget does).
func (m *Membership) Forget(id string) error {
	if id == m.cfg.NodeID {
		return fmt.Errorf("cannot forget member %s: it is this node", id)
	}
	m.rs.tableMu.Lock()
	_, known := m.rs.table[id]
	if known {
		if m.rs.forgotten == nil {
			m.rs.forgotten = map[string]bool{}
		}
		m.rs.forgotten[id] = true
	}
	m.rs.tableMu.Unlock()
	if !known {
		return fmt.Errorf("cannot forget member %s: %w", id, ErrUnknownMember)
	}
	m.rs.log.Warn("member forgotten by an operator: it owns no partitions here until it joins again", "member", id)
	m.rs.runOnce()
	return nil
}

// ErrUnknownMember: no member by that id is in the member table.
var ErrUnknownMember = errors.New("no such member")

// Draining reports whether member id is alive and draining: it keeps what
// it holds and serves reads, but takes no new chunks as an owner. It does not
// block.
func (m *Membership) Draining(id string) bool {
	d := m.rs.draining.Load()
	return d != nil && (*d)[id]
}

// Died reports whether member id was declared dead (it stopped answering
// without announcing that it leaves) and has not come back: it may come
// back with what it held. A member that left after a drain did not die. It
// does not block beyond a short lock.
func (m *Membership) Died(id string) bool {
	m.rs.tableMu.Lock()
	defer m.rs.tableMu.Unlock()
	x := m.rs.table[id]
	return x != nil && x.Liveness == Dead
}

// RebuildNow applies pending membership events and rebuilds the ring synchronously; for tests.
func (m *Membership) RebuildNow() *ring.Ring { return m.rs.runOnce() }

// GossipAddr returns the advertised gossip address ("" before Start); peers join it.
func (m *Membership) GossipAddr() string {
	if a := m.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// rejoinLoop joins the seeds again every RejoinInterval (±20%), and at once when a member leaves or is
// declared dead; while joins fail it retries with backoff from 1s up to rejoinRetryMax.
//
// After a partition heals, each side holds the other dead and memberlist probes and gossips only to live
// members, so nothing but a join brings the sides together again: a member lost starts the retries at once,
// and their cap keeps the wait after the heal near the suspicion timeout whatever RejoinInterval is.
func (m *Membership) rejoinLoop(ctx context.Context) {
	failures := 0
	for {
		d := m.cfg.RejoinInterval
		if m.lastJoinFailed() {
			d = min(d, m.rejoinRetryMax(), time.Second<<min(failures, 16))
			failures++
		} else {
			failures = 0
		}
		d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-m.lost:
			t.Stop()
		}
		m.rejoinOnce(ctx)
	}
}

// rejoinRetryMax caps the wait between failing joins: memberlist's suspicion timeout before Lifeguard's
// scaling (SuspicionMult × ProbeInterval; 4s with the default timings), at least 1s.
func (m *Membership) rejoinRetryMax() time.Duration {
	return max(time.Second, time.Duration(m.cfg.Timing.SuspicionMult)*m.cfg.Timing.ProbeInterval)
}

// rejoinOnce resolves the seeds again and joins every address behind them that is not a member yet (all of
// them members: nothing to do), and logs the outcome: the first failure of a run of failures at Warn, the rest at Debug, recovery at Info. It blocks
// for the join (about Timing.TCPTimeout per unreachable seed address).
func (m *Membership) rejoinOnce(ctx context.Context) {
	ml := m.ml.Load()
	if ml == nil || ctx.Err() != nil {
		return
	}
	missing, resolveErr := m.seedsToJoin(ctx)
	if len(missing) == 0 {
		// A seed that did not resolve is a failed attempt (retried with backoff); every address a member
		// is nothing to do.
		if resolveErr != nil {
			m.noteJoin(m.cfg.Join, 0, resolveErr)
		} else {
			m.noteJoin(nil, 0, nil)
		}
		return
	}
	n, err := ml.Join(missing)
	if err != nil {
		err = errors.Join(err, resolveErr)
	}
	m.noteJoin(missing, n, err)
}

func (m *Membership) lastJoinFailed() bool {
	m.joinMu.Lock()
	defer m.joinMu.Unlock()
	return m.joinFailing
}

func (m *Membership) noteJoin(seeds []string, contacted int, err error) {
	m.joinMu.Lock()
	wasFailing, joinedBefore := m.joinFailing, m.joinedOnce
	m.joinFailing = err != nil
	m.joinedOnce = m.joinedOnce || err == nil
	m.joinMu.Unlock()
	if err != nil {
		// memberlist joins per-seed errors as "N errors occurred:\n\t* ..."; keep the log on one line.
		err = errors.New(strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n\t* ", "; ")), " "))
	}
	switch {
	case err != nil && !wasFailing:
		m.log.Warn("cannot join seeds; retrying in the background", "seeds", seeds, "err", err)
	case err != nil:
		m.log.Debug("join attempt failed", "seeds", seeds, "err", err)
	case len(seeds) == 0:
		m.log.Debug("every seed is a member; not joining")
	case wasFailing || !joinedBefore:
		m.log.Info("joined seeds", "seeds", seeds, "contacted", contacted, "after_failures", wasFailing)
	default:
		m.log.Debug("rejoined seeds", "seeds", seeds, "contacted", contacted)
	}
}

// localMeta is this node's metadata and its encoding, which NodeMeta hands to memberlist.
type localMeta struct {
	mu  sync.Mutex
	m   nodeMeta
	enc []byte // replaced, never modified in place
}

func (l *localMeta) set(m nodeMeta) error {
	enc, err := m.encode()
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.m, l.enc = m, enc
	l.mu.Unlock()
	return nil
}

func (l *localMeta) update(f func(*nodeMeta)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.m
	f(&m)
	enc, err := m.encode()
	if err != nil {
		return err
	}
	l.m, l.enc = m, enc
	return nil
}

func (l *localMeta) setState(s State) error { return l.update(func(m *nodeMeta) { m.State = s }) }

func (l *localMeta) setBootTime(t time.Time) error {
	return l.update(func(m *nodeMeta) { m.BootTime = t })
}

func (l *localMeta) encoded() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.enc
}
