package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/kvring/kvring/ring"
)

// Config configures gossip membership and the ring built from it. DefaultConfig returns
// the documented defaults; LocalConfig is a preset for tests. A zero duration, a zero Timing field,
// a zero Ring or a nil Logger takes its default during validation.
type Config struct {
	// NodeID is this node's identity in the cluster and on the ring (the store's node id). Required; unique
	// per cluster.
	NodeID string
	// GossipAddr is the TCP+UDP address gossip binds to, "host:port". The host must be empty or an IP
	// literal. Default ":7946". Port 0 picks a free port (see membership.GossipAddr).
	GossipAddr string
	// AdvertiseAddr is the "host:port" peers reach this node's gossip at; a host name is resolved at start.
	// Default "": the bound address, with an unspecified host replaced by the machine's first non-loopback,
	// non-link-local address (IPv4 preferred; 127.0.0.1 if it has none). An empty or 0 port means the bound port; with GossipAddr port 0
	// the bound port is always advertised.
	AdvertiseAddr string
	// Join lists seed gossip addresses ("host:port", or "host" for this node's gossip port). A host name is
	// resolved on every attempt and every address behind it is joined, so a Kubernetes headless-Service name
	// reaches every pod it lists. A seed that is down is not fatal: joining is retried. Default
	// none: the node starts a cluster of its own (until someone joins it).
	Join []string
	// Resolver resolves the host names of Join (on every join attempt; every address a name resolves to is
	// joined) and of AdvertiseAddr. Default net.DefaultResolver.
	Resolver Resolver
	// RejoinInterval is how often the seeds are joined again, with ±20% jitter, so a split cluster heals;
	// a round is skipped when every seed is already a member. A member that leaves or is declared dead
	// starts a round at once, and until a join succeeds, retries back off from 1s up to the smaller of
	// RejoinInterval and the suspicion timeout (Timing.SuspicionMult × Timing.ProbeInterval, at least 1s),
	// so the sides of a healed partition find each other within about that. Default 30s.
	RejoinInterval time.Duration
	// BroadcastTimeout bounds how long a state change (SetState) and a leave (Close) wait for their message
	// to reach at least one peer; a shorter context deadline wins. Default 5s.
	BroadcastTimeout time.Duration
	// SettleWindow is how long after a ring change, or after this node starts, reads also ask members of
	// earlier releases, which gossip no hand-off summary, about every chunk (see Unsettled). Members of this
	// release are asked per partition, by their summaries (package moves). Default 15s; negative: never.
	SettleWindow time.Duration
	// Ring holds the cluster-wide ring settings. Peers whose settings differ (ring.Config.SettingsFingerprint)
	// are refused. Its Placement is ignored: the ring is built with the placement version the members agree
	// on (see Versions). Default ring.DefaultConfig().
	Ring ring.Config
	// Versions are the versions of each versioned part (placement, wire) this node supports. The node uses
	// the highest version every member supports (Membership.Active), and refuses peers with no version in
	// common. Default DefaultVersions(); tests set RehearsalVersions() to rehearse a switch.
	Versions Versions
	// GRPCAddr is the gRPC address peers and clients reach this node at; it is gossiped and becomes the
	// ring member's Addr. Filled by the node once its listener is open. Default "".
	GRPCAddr string
	// AdminAddr is the admin HTTP address, gossiped for operators. Default "".
	AdminAddr string
	// RESPAddr is the Redis-protocol address, gossiped so that every node
	// can send Redis Cluster clients to the owners. Default "": off.
	RESPAddr string
	// Build is this node's version and commit, gossiped so that every member
	// can show which build each runs, and named when a peer is refused.
	// Default: none (members show "before v0.4.0"); the node sets it.
	Build Build
	// Timing holds memberlist's failure-detection and gossip timings. Default DefaultGossipTiming().
	Timing GossipTiming
	// Keys encrypt and authenticate gossip (memberlist's keyring, AES-GCM): each 16, 24 or 32 bytes; the
	// first encrypts what this node sends, every one is tried on what it receives, so keys can be rotated
	// without a split (keyring.go). Messages that no key opens, and plaintext ones, are dropped, and their
	// sender is logged once. Default none: gossip is plaintext and anyone who reaches the port may join.
	Keys [][]byte
	// Logger receives membership logs (memberlist's own lines carry source=memberlist). Default
	// slog.Default().
	Logger *slog.Logger
	// OnRingChange, if set, is called after every ring rebuild with the replaced and the new ring, from the
	// ring goroutine (or from Start, or the caller of RebuildNow); calls are serialised, in epoch order. It must
	// not block for long and must not call RebuildNow, SetState or Close. Default nil.
	OnRingChange func(old, new *ring.Ring)
	// OnDrainingChange, if set, is called when a member starts or stops draining (the ring stays the same: a
	// draining member keeps its partitions), from the same goroutines as OnRingChange and with the same
	// limits. Default nil.
	OnDrainingChange func()
	// OnMemberGone, if set, is called with the id of another member once gossip has declared it dead, it
	// left, or it came back with another boot time (it restarted before it was found dead): whatever its
	// earlier process asked of this node will not be released by it. Never on a suspicion alone. Called from
	// the same goroutines as OnRingChange and with the same limits. Default nil.
	OnMemberGone func(id string)
	// Now is the clock of the settle window, member timestamps and the boot time gossiped in the metadata.
	// Default time.Now.
	Now func() time.Time
}

// GossipTiming holds the memberlist timings kvring exposes; see memberlist.Config for their exact meaning.
//
// How they add up to the time a member that cannot be reached is declared dead (SWIM with Lifeguard): every
// member probes one other each ProbeInterval, going round its shuffled list of members, so a given member is
// probed by each other member within 2 × (n − 1) probe intervals, and by some member far sooner. A probe
// fails after the direct ping's ProbeTimeout, indirect pings through 3 others and a TCP ping, at the end of
// its probe interval. The prober then suspects the member, and every member that hears of it starts a timer:
// the suspicion timeout, SuspicionMult × max(1, log10 n) × ProbeInterval, stretched to SuspicionMaxTimeoutMult
// times that until SuspicionMult − 2 other members have confirmed the suspicion by failing probes of their own
// (no confirmations are awaited when the cluster has too few members to give them).
//
// Members asked for an indirect ping answer "no ack" (a nack) ProbeTimeout after they ask; a nack that has not
// arrived by the end of the probe interval counts against the prober's own health (Lifeguard's awareness), and
// each point of it lengthens its probe interval by one ProbeInterval. ProbeTimeout must therefore stay well
// under half of ProbeInterval, or every failed probe makes the prober slow down (see DefaultProbeTimeout).
type GossipTiming struct {
	// ProbeInterval is how often a random peer is probed. Default DefaultProbeInterval.
	ProbeInterval time.Duration
	// ProbeTimeout is how long to wait for a probe's ack before asking others to probe. Must be less than
	// ProbeInterval. Default DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// GossipInterval is how often queued broadcasts are gossiped. Default 200ms.
	GossipInterval time.Duration
	// PushPullInterval is how often full state is exchanged with a random peer. Default 30s.
	PushPullInterval time.Duration
	// SuspicionMult scales how long a suspect peer has to refute before it is declared dead (the suspicion
	// timeout: SuspicionMult × max(1, log10 n) × ProbeInterval), and SuspicionMult − 2 is how many other
	// members' confirmations bring a suspicion down to it. Default DefaultSuspicionMult.
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds a suspicion that gathers fewer confirmations: it lasts at most this
	// many suspicion timeouts (1: always exactly one). Default DefaultSuspicionMaxTimeoutMult.
	SuspicionMaxTimeoutMult int
	// TCPTimeout bounds TCP connects and push/pull exchanges, including each join attempt. Default 10s.
	TCPTimeout time.Duration
}

// The failure-detection defaults. memberlist's LAN defaults (ProbeInterval 1s, ProbeTimeout 500ms,
// SuspicionMult 4, SuspicionMaxTimeoutMult 6) declared two of five members cut off by a partition dead only
// after up to 12.9s: with ProbeTimeout half the probe interval the nacks of a failed probe arrive just after
// the interval ends, so each failed probe raised the prober's awareness by up to 3 and stretched its next
// probes to 4s; with three members left, a suspicion's timeout reaches its floor only once all three probed
// the lost ones themselves (SuspicionMult − 2 = 2 confirmations), and stays at 24s less a part otherwise.
// Probing twice as often with SuspicionMult doubled keeps the suspicion timeout at 4s (up to 10 members),
// and a ProbeTimeout of 200ms lets nacks arrive in time.
//
// A suspicion lasts exactly the suspicion timeout (SuspicionMaxTimeoutMult 1), at every cluster size. Up to 7
// members memberlist awaits no confirmations, so it did anyway; from 8 members on, Lifeguard's longer
// suspicion (up to SuspicionMaxTimeoutMult timeouts, shortened by each other member's failed probe of the
// suspect) added 1-5s: with 7 of 16 members cut off, the majority's probes slow down (the cut members they
// ask for indirect pings send no nacks, which counts against their own health), confirmations come late,
// and the last cut member was declared dead 11.0s after the cut, over twice the 4.8s suspicion timeout. The
// time a suspicion takes is now the time until some member's probe of the suspect fails (up to about 3s at
// 16 members) plus the timeout. Lifeguard's guard against an accuser that is itself slow stays in its
// probes (the slow accuser probes less often); a falsely suspected member refutes within the timeout: 5%
// loss on every link of 16 members for 2 minutes declared none dead.
const (
	DefaultProbeInterval           = 500 * time.Millisecond
	DefaultProbeTimeout            = 200 * time.Millisecond
	DefaultSuspicionMult           = 8
	DefaultSuspicionMaxTimeoutMult = 1
)

// DefaultGossipTiming returns kvring's failure-detection defaults (see the Default… consts) and memberlist's
// LAN timings (memberlist.DefaultLANConfig) for the rest.
func DefaultGossipTiming() GossipTiming {
	return GossipTiming{
		ProbeInterval:           DefaultProbeInterval,
		ProbeTimeout:            DefaultProbeTimeout,
		GossipInterval:          200 * time.Millisecond,
		PushPullInterval:        30 * time.Second,
		SuspicionMult:           DefaultSuspicionMult,
		SuspicionMaxTimeoutMult: DefaultSuspicionMaxTimeoutMult,
		TCPTimeout:              10 * time.Second,
	}
}

// longestSuspicion is the longest a suspicion of a member can last before it
// is declared dead, at up to 10,000 members: SuspicionMaxTimeoutMult ×
// SuspicionMult × log10 n (at most 4) × ProbeInterval.
func (t GossipTiming) longestSuspicion() time.Duration {
	return time.Duration(4*t.SuspicionMaxTimeoutMult*t.SuspicionMult) * t.ProbeInterval
}

// apply sets memberlist's timings to t's.
func (t GossipTiming) apply(mc *memberlist.Config) {
	mc.ProbeInterval = t.ProbeInterval
	mc.ProbeTimeout = t.ProbeTimeout
	mc.GossipInterval = t.GossipInterval
	mc.PushPullInterval = t.PushPullInterval
	mc.SuspicionMult = t.SuspicionMult
	mc.SuspicionMaxTimeoutMult = t.SuspicionMaxTimeoutMult
	mc.TCPTimeout = t.TCPTimeout
}

// DefaultConfig returns the defaults: gossip on ":7946", no seeds, net.DefaultResolver, rejoin every 30s,
// broadcast timeout 5s, a settle window of 15s, ring.DefaultConfig(), DefaultVersions(), LAN timings, slog.Default(). NodeID must
// still be set.
func DefaultConfig() Config {
	return Config{
		GossipAddr:       ":7946",
		RejoinInterval:   30 * time.Second,
		BroadcastTimeout: 5 * time.Second,
		SettleWindow:     15 * time.Second,
		Ring:             ring.DefaultConfig(),
		Versions:         DefaultVersions(),
		Timing:           DefaultGossipTiming(),
		Resolver:         net.DefaultResolver,
		Logger:           slog.Default(),
		Now:              time.Now,
	}
}

// LocalConfig is a preset for tests and single-host clusters, like memberlist.DefaultLocalConfig:
// gossip on 127.0.0.1 with a free port, fast probes and gossip, short timeouts, rejoin every second.
func LocalConfig(nodeID string) Config {
	c := DefaultConfig()
	c.NodeID = nodeID
	c.GossipAddr = "127.0.0.1:0"
	c.RejoinInterval = time.Second
	c.BroadcastTimeout = 2 * time.Second
	c.Timing = GossipTiming{
		ProbeInterval:    500 * time.Millisecond,
		ProbeTimeout:     200 * time.Millisecond,
		GossipInterval:   20 * time.Millisecond,
		PushPullInterval: time.Second,
		SuspicionMult:    3,
		// memberlist's, as in DefaultLocalConfig: a loaded test machine
		// starves probes now and then, and Lifeguard's longer suspicions
		// let them be refuted.
		SuspicionMaxTimeoutMult: 6,
		TCPTimeout:              time.Second,
	}
	return c
}

// validate fills zero fields with their defaults (fill) and reports every invalid setting.
func (c *Config) validate() error {
	c.fill(DefaultConfig())
	t := &c.Timing
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node id is required"))
	}
	if _, err := parseBindAddr(c.GossipAddr); err != nil {
		errs = append(errs, err)
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := splitAdvertise(c.AdvertiseAddr); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range c.Join {
		if s == "" {
			errs = append(errs, errors.New("join address must not be empty"))
		}
	}
	if c.RejoinInterval < 0 || c.BroadcastTimeout < 0 {
		errs = append(errs, fmt.Errorf("rejoin interval (%v) and broadcast timeout (%v) must not be negative",
			c.RejoinInterval, c.BroadcastTimeout))
	}
	if t.ProbeInterval < 0 || t.ProbeTimeout < 0 || t.GossipInterval < 0 || t.PushPullInterval < 0 ||
		t.TCPTimeout < 0 || t.SuspicionMult < 0 || t.SuspicionMaxTimeoutMult < 0 {
		errs = append(errs, fmt.Errorf("gossip timings must not be negative: %+v", *t))
	} else if t.ProbeTimeout >= t.ProbeInterval {
		errs = append(errs, fmt.Errorf("gossip probe timeout (%v) must be less than the probe interval (%v)",
			t.ProbeTimeout, t.ProbeInterval))
	}
	if err := c.Ring.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Versions.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := checkKeys(c.Keys); err != nil {
		errs = append(errs, err)
	}
	if c.NodeID != "" {
		// State and boot time have a fixed size, so if this fits, every later state does.
		m := nodeMeta{NodeID: c.NodeID, GRPCAddr: c.GRPCAddr, AdminAddr: c.AdminAddr, State: Joining,
			Fingerprint: c.legacyFingerprint(), RESPAddr: c.RESPAddr, Build: c.Build, Settings: c.Ring.SettingsFingerprint(),
			Versions: &c.Versions}
		if _, err := m.encode(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid membership configuration: %w", err)
	}
	return nil
}

// fill sets the zero fields of c, its gossip timings included, to d's.
func (c *Config) fill(d Config) {
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Resolver == nil {
		c.Resolver = d.Resolver
	}
	if c.GossipAddr == "" {
		c.GossipAddr = d.GossipAddr
	}
	if c.RejoinInterval == 0 {
		c.RejoinInterval = d.RejoinInterval
	}
	if c.BroadcastTimeout == 0 {
		c.BroadcastTimeout = d.BroadcastTimeout
	}
	if c.SettleWindow == 0 {
		c.SettleWindow = d.SettleWindow
	}
	if c.Ring == (ring.Config{}) {
		c.Ring = d.Ring
	}
	if c.Versions == (Versions{}) {
		c.Versions = DefaultVersions()
	}
	t, dt := &c.Timing, d.Timing
	for _, f := range []struct{ v, def *time.Duration }{
		{&t.ProbeInterval, &dt.ProbeInterval}, {&t.ProbeTimeout, &dt.ProbeTimeout},
		{&t.GossipInterval, &dt.GossipInterval}, {&t.PushPullInterval, &dt.PushPullInterval},
		{&t.TCPTimeout, &dt.TCPTimeout},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if t.SuspicionMult == 0 {
		t.SuspicionMult = dt.SuspicionMult
	}
	if t.SuspicionMaxTimeoutMult == 0 {
		t.SuspicionMaxTimeoutMult = dt.SuspicionMaxTimeoutMult
	}
}

// legacyFingerprint is the full ring fingerprint at the lowest placement version this node supports: what a
// build before v0.4.0 gossips and compares.
func (c *Config) legacyFingerprint() string {
	r := c.Ring
	r.Placement = c.Versions.Placement.Min
	return r.Fingerprint()
}

// parseBindAddr parses GossipAddr: an empty host or an IP literal, and a port.
func parseBindAddr(s string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("gossip address %q: %w", s, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("gossip address %q: bad port %q", s, port)
	}
	ip := netip.IPv4Unspecified() // like memberlist: an empty host binds IPv4 only; use "[::]:port" for both
	if host != "" {
		if ip, err = netip.ParseAddr(host); err != nil {
			return netip.AddrPort{}, fmt.Errorf("gossip address %q: host must be empty or an IP address", s)
		}
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(p)), nil
}

// splitAdvertise parses AdvertiseAddr into a host (IP or name) and a port (0: the bound port).
func splitAdvertise(s string) (string, uint16, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("advertise address %q: %w", s, err)
	}
	if host == "" {
		return "", 0, fmt.Errorf("advertise address %q: host is required", s)
	}
	var p uint64
	if port != "" {
		if p, err = strconv.ParseUint(port, 10, 16); err != nil {
			return "", 0, fmt.Errorf("advertise address %q: bad port %q", s, port)
		}
	}
	return host, uint16(p), nil
}

// advertiseIP decides the IP peers reach this node at (see AdvertiseAddr). It may resolve a host name or list
// the machine's interfaces, so it runs at start, not in validate.
func (c *Config) advertiseIP(ctx context.Context, bind netip.AddrPort) (netip.Addr, uint16, error) {
	if c.AdvertiseAddr != "" {
		host, port, err := splitAdvertise(c.AdvertiseAddr)
		if err != nil {
			return netip.Addr{}, 0, err
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			return ip.Unmap(), port, nil
		}
		ips, err := c.Resolver.LookupNetIP(ctx, "ip", host)
		if err != nil || len(ips) == 0 {
			return netip.Addr{}, 0, fmt.Errorf("cannot resolve advertise address %q: %w", c.AdvertiseAddr, err)
		}
		return ips[0].Unmap(), port, nil
	}
	if !bind.Addr().IsUnspecified() {
		return bind.Addr(), 0, nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("cannot list interface addresses to advertise: %w", err)
	}
	var v6 netip.Addr
	for _, a := range addrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := pfx.Addr().Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || !ip.IsGlobalUnicast() {
			continue
		}
		if ip.Is4() {
			return ip, 0, nil
		}
		if !v6.IsValid() {
			v6 = ip
		}
	}
	if v6.IsValid() {
		return v6, 0, nil
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0, nil
}

// AdvertiseIP is the IP this configuration advertises to peers (see AdvertiseAddr): the node uses it for the
// gRPC address it gossips when its listener is bound to every interface. It validates a copy of c first and
// may resolve a host name or list the machine's interfaces.
func AdvertiseIP(ctx context.Context, c Config) (netip.Addr, error) {
	if err := c.validate(); err != nil {
		return netip.Addr{}, err
	}
	bind, err := parseBindAddr(c.GossipAddr)
	if err != nil {
		return netip.Addr{}, err
	}
	ip, _, err := c.advertiseIP(ctx, bind)
	return ip, err
}
