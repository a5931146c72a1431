package membership

import (
	"context"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/kvring/kvring/internal/testutil"
)

// gossipLinks drops what one member's gossip sends another, in both UDP
// and TCP, the way a partition does: a packet to a cut address is silently
// lost and a connection to it times out. Safe for concurrent use.
type gossipLinks struct {
	mu  sync.Mutex
	cut map[[2]string]bool // {from member, to gossip address}
}

func (g *gossipLinks) set(from, to string, cut bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cut == nil {
		g.cut = map[[2]string]bool{}
	}
	g.cut[[2]string{from, to}] = cut
}

func (g *gossipLinks) isCut(from, to string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cut[[2]string{from, to}]
}

// faultyTransport is member from's gossip transport through links.
type faultyTransport struct {
	memberlist.Transport
	from  string
	links *gossipLinks
}

func (t faultyTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.links.isCut(t.from, addr) {
		return time.Now(), nil // lost on the way
	}
	return t.Transport.WriteTo(b, addr)
}

func (t faultyTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.links.isCut(t.from, addr) {
		<-time.After(timeout) // a SYN nobody answers: the dial times out
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	}
	return t.Transport.DialTimeout(addr, timeout)
}

// startMembersOn starts members named ids, all joining the first, whose
// gossip goes through links.
func startMembersOn(t *testing.T, links *gossipLinks, ids ...string) []testMembership {
	t.Helper()
	var ms []testMembership
	for i, id := range ids {
		cfg, logs := testMembershipConfig(t, id)
		if i > 0 {
			cfg.Join = []string{ms[0].GossipAddr()}
		}
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m.wrapTransport = func(tr memberlist.Transport) memberlist.Transport {
			return faultyTransport{Transport: tr, from: id, links: links}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err = m.Start(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = m.Close(ctx)
		})
		ms = append(ms, testMembership{m, logs})
	}
	for _, m := range ms {
		waitForMembership(t, m.cfg.NodeID+" sees every member alive", func() bool {
			return slices.Equal(aliveMemberIDs(m.Membership), ids)
		})
	}
	return ms
}

// unreachableLine is how checkReach logs a mark, as the tests' text logs
// show it.
const unreachableLine = `msg="member unreachable from this node though gossip holds it alive; writes go around it until it answers a probe"`

// TestAMemberOnlyThisNodeCannotReachIsSuspectHere: a bridge partition, a
// and c cut from each other while b reaches both. Gossip suspects no one (b
// probes c for a, and a for c), so without more a write coordinated by a
// waited for c until PeerTimeout; a and c now report each other suspect
// (writes go around) while b suspects neither, and once the link heals the
// next direct probe clears the mark.
func TestAMemberOnlyThisNodeCannotReachIsSuspectHere(t *testing.T) {
	t.Parallel()
	links := &gossipLinks{}
	ms := startMembersOn(t, links, "a", "b", "c")
	a, b, c := ms[0], ms[1], ms[2]
	cut := func(on bool) {
		links.set("a", c.GossipAddr(), on)
		links.set("c", a.GossipAddr(), on)
	}
	cut(true)
	testutil.Eventually(t, "a and c suspect each other", 20*time.Second, func() bool {
		return a.Suspect("c") && c.Suspect("a")
	})
	if a.logs.Count(unreachableLine, "member=c ") == 0 && c.logs.Count(unreachableLine, "member=a ") == 0 {
		t.Fatal("a and c suspect each other, but not by the reach check: gossip's own probes failed")
	}
	// Only the reach check's own marks are asserted for the members each
	// side reaches: on a loaded machine gossip's probes fail now and then
	// too (and mark what they fail on), which is not what is tested here.
	if n := b.logs.Count(unreachableLine); n != 0 {
		t.Fatalf("b reaches both sides and marked %d members unreachable:\n%s", n, b.logs)
	}
	if a.logs.Count(unreachableLine, "member=b ") > 0 || c.logs.Count(unreachableLine, "member=b ") > 0 {
		t.Fatal("a or c marked b, which it reaches, unreachable")
	}
	cut(false)
	testutil.Eventually(t, "a and c no longer suspect each other", 20*time.Second, func() bool {
		return !a.Suspect("c") && !c.Suspect("a")
	})
}

// TestAFailedPingLineQueuesAReachCheck: memberlist's line for a direct
// ping without an ack names the member to check; other lines do not.
func TestAFailedPingLineQueuesAReachCheck(t *testing.T) {
	var got []string
	w := memberlistLog{log: LocalConfig("x").Logger, pingFailed: func(name string) { got = append(got, name) }}
	for _, line := range []string{
		"[DEBUG] memberlist: Failed UDP ping: peer-1 (timeout reached)\n",
		"[DEBUG] memberlist: Failed UDP ping:  (timeout reached)\n",
		"[INFO] memberlist: Suspect peer-2 has failed, no acks received\n",
		"[ERR] memberlist: Failed to send UDP ping: write: connection refused\n",
	} {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, []string{"peer-1"}) {
		t.Fatalf("members queued for a reach check: %q, want [peer-1]", got)
	}
}
