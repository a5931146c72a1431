package membership

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/kvring/kvring/internal/testutil"
)

// fakeResolver answers LookupNetIP from a table the test changes while members run.
type fakeResolver struct {
	mu      sync.Mutex
	records map[string][]netip.Addr
	asked   int
}

func (r *fakeResolver) set(host string, addrs ...netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records[host] = addrs
}

func (r *fakeResolver) lookups() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked++
	addrs, ok := r.records[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return slices.Clone(addrs), nil
}

// holdGossipPortOn holds one port for TCP and UDP on every address of ips, so that members bound to those
// addresses share a port, like the pods behind a headless Service.
func holdGossipPortOn(t *testing.T, ips ...string) (int, []*gossipPort) {
	t.Helper()
next:
	for range 50 {
		first := holdGossipPortAt(t, net.JoinHostPort(ips[0], "0"))
		if first == nil {
			continue
		}
		port := first.tcp.Port()
		held := []*gossipPort{first}
		for _, ip := range ips[1:] {
			g := holdGossipPortAt(t, net.JoinHostPort(ip, strconv.Itoa(port)))
			if g == nil {
				for _, h := range held {
					h.tcp.Close()
					h.udp.Close()
				}
				continue next
			}
			held = append(held, g)
		}
		return port, held
	}
	t.Fatalf("no port free for TCP and UDP on every one of %v", ips)
	return 0, nil
}

// holdGossipPortAt holds addr for TCP and UDP until the test ends; nil if either side is taken.
func holdGossipPortAt(t *testing.T, addr string) *gossipPort {
	t.Helper()
	h, err := testutil.HoldPort(addr)
	if err != nil {
		return nil
	}
	udp, err := net.ListenPacket("udp", h.Addr())
	if err != nil {
		h.Close()
		return nil
	}
	t.Cleanup(func() { h.Close(); udp.Close() })
	return &gossipPort{tcp: h, udp: udp}
}

// TestMembershipJoinsEveryAddressBehindASeedName: one seed name that resolves to two members which do not
// know each other (two clusters of one) makes the joining node contact both, so all three end up in one
// cluster; the name is resolved through the configured Resolver, not the system's.
func TestMembershipJoinsEveryAddressBehindASeedName(t *testing.T) {
	t.Parallel()
	port, held := holdGossipPortOn(t, "127.0.0.2", "127.0.0.3")
	var pods []testMembership
	for i, id := range []string{"pod-1", "pod-2"} {
		cfg, logs := testMembershipConfig(t, id)
		cfg.GossipAddr = held[i].addr()
		held[i].releaseUDP()
		pods = append(pods, startTestMember(t, cfg, logs))
	}
	res := &fakeResolver{records: map[string][]netip.Addr{
		"kvring-peers.test": {netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")},
	}}
	cfg, logs := testMembershipConfig(t, "pod-0")
	cfg.Join = []string{net.JoinHostPort("kvring-peers.test", strconv.Itoa(port))}
	cfg.Resolver = res
	p0 := startTestMember(t, cfg, logs)

	want := []string{"pod-0", "pod-1", "pod-2"}
	for _, m := range append(pods, p0) {
		waitForMembership(t, m.cfg.NodeID+" sees all three", func() bool {
			return slices.Equal(aliveMemberIDs(m.Membership), want) && slices.Equal(ringMemberIDs(m.Ring()), want)
		})
	}
	if n := len(p0.logs.Lines(`msg="joined seeds"`, "127.0.0.2:"+strconv.Itoa(port), "127.0.0.3:"+strconv.Itoa(port))); n != 1 {
		t.Errorf("pod-0 logged %d joins naming both resolved addresses, want 1", n)
	}
}

// TestMembershipResolvesSeedNameOnEveryRejoin: a seed name that does not resolve yet (a headless Service
// without records) is retried; once it resolves the node joins, and an address that appears behind the name
// later (a new pod, still a cluster of its own) is joined on a later round.
func TestMembershipResolvesSeedNameOnEveryRejoin(t *testing.T) {
	t.Parallel()
	port, held := holdGossipPortOn(t, "127.0.0.2", "127.0.0.3")
	res := &fakeResolver{records: map[string][]netip.Addr{}}
	cfg, logs := testMembershipConfig(t, "pod-0")
	cfg.Join = []string{net.JoinHostPort("kvring-peers.test", strconv.Itoa(port))}
	cfg.Resolver = res
	p0 := startTestMember(t, cfg, logs)
	waitForMembership(t, "pod-0 retries the unresolved name", func() bool {
		return len(p0.logs.Lines(`msg="join attempt failed"`, "cannot resolve seed")) >= 2
	})

	var pods []testMembership
	for i, id := range []string{"pod-1", "pod-2"} {
		cfg, logs := testMembershipConfig(t, id)
		cfg.GossipAddr = held[i].addr()
		held[i].releaseUDP()
		pods = append(pods, startTestMember(t, cfg, logs))
	}
	res.set("kvring-peers.test", netip.MustParseAddr("127.0.0.2"))
	waitForMembership(t, "pod-0 and pod-1 to meet", func() bool {
		return slices.Equal(aliveMemberIDs(p0.Membership), []string{"pod-0", "pod-1"})
	})
	if ids := aliveMemberIDs(pods[1].Membership); !slices.Equal(ids, []string{"pod-2"}) {
		t.Fatalf("pod-2 is in a cluster with %v before its address resolves, want only itself", ids)
	}

	before := res.lookups()
	res.set("kvring-peers.test", netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.2"))
	want := []string{"pod-0", "pod-1", "pod-2"}
	for _, m := range append(pods, p0) {
		waitForMembership(t, m.cfg.NodeID+" sees all three", func() bool {
			return slices.Equal(aliveMemberIDs(m.Membership), want)
		})
	}
	if res.lookups() <= before {
		t.Error("the seed name was not resolved again")
	}
}

// TestMembershipSeedAddrs: literals stand for themselves, a name for every address behind it, a seed without
// a port takes the gossip port, duplicates go, and an unresolvable seed is an error naming it that does not
// hide the others.
func TestMembershipSeedAddrs(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{records: map[string][]netip.Addr{
		"peers": {netip.MustParseAddr("10.0.0.3"), netip.MustParseAddr("::ffff:10.0.0.2")},
	}}
	cfg := LocalConfig("n")
	cfg.Resolver = res
	cfg.Join = []string{"peers:7946", "10.0.0.2:7946", "peers", "gone:7946", "10.0.0.9:1"}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.bindPort = 8000
	got, err := m.seedAddrs(t.Context())
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || dnsErr.Name != "gone" {
		t.Errorf("err = %v, want the DNS error of gone", err)
	}
	want := []string{"10.0.0.2:7946", "10.0.0.2:8000", "10.0.0.3:7946", "10.0.0.3:8000", "10.0.0.9:1"}
	var gotS []string
	for _, a := range got {
		gotS = append(gotS, a.String())
	}
	if !slices.Equal(gotS, want) {
		t.Errorf("seed addresses = %v, want %v", gotS, want)
	}
}
