package services

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// goneLog records the clients a clientConns reports gone; safe for
// concurrent use (grace timers report on goroutines of their own).
type goneLog struct {
	mu   sync.Mutex
	gone []string
}

func (g *goneLog) add(client string) { g.mu.Lock(); g.gone = append(g.gone, client); g.mu.Unlock() }

// take returns the clients reported since the last take, sorted.
func (g *goneLog) take() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.gone
	g.gone = nil
	slices.Sort(out)
	return out
}

// TestAClientIsGoneWithItsLastConnection: a client named on two
// connections (one token, two connections) is gone only when both closed;
// a connection that was never opened, or closed already, keeps nothing.
func TestAClientIsGoneWithItsLastConnection(t *testing.T) {
	var g goneLog
	cc := newClientConns(-1, g.add)
	cc.opened("10.0.0.1:1000")
	cc.opened("10.0.0.1:1001")
	cc.named("10.0.0.1:1000", "token:a")
	cc.named("10.0.0.1:1000", "token:a") // every call names it again
	cc.named("10.0.0.1:1001", "token:a")
	cc.named("10.0.0.1:1001", "addr:10.0.0.1")
	if cc.closed("10.0.0.1:1000"); len(g.take()) != 0 {
		t.Fatal("closing one of two connections: a client is gone, want none")
	}
	cc.closed("10.0.0.1:1001")
	if gone := g.take(); !slices.Equal(gone, []string{"addr:10.0.0.1", "token:a"}) {
		t.Fatalf("closing the last connection: %v gone, want both clients", gone)
	}
	cc.named("10.0.0.1:1001", "token:a") // a call that raced the close
	cc.named("", "token:b")
	if len(cc.conns) != 0 || len(cc.open) != 0 {
		t.Fatalf("kept %d connections and %d clients after every connection closed", len(cc.conns), len(cc.open))
	}
}

// TestAClientThatReconnectsWithinTheGraceKeepsItsLeases: a client named by
// its token or its remote address whose last connection closes is gone
// only once the grace has passed without a call naming it again: one that
// reconnects and calls within it is not gone (its leases stay), one that
// does not is gone at the grace's end. A loopback client named by its
// connection is gone at once: no reconnect can carry that name. Stopping
// ends the timers without reporting anyone.
func TestAClientThatReconnectsWithinTheGraceKeepsItsLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g goneLog
		cc := newClientConns(5*time.Second, g.add)
		cc.opened("10.0.0.1:1000")
		cc.named("10.0.0.1:1000", "token:a")
		cc.opened("10.0.0.2:1000")
		cc.named("10.0.0.2:1000", "addr:10.0.0.2")
		cc.opened("127.0.0.1:4000")
		cc.named("127.0.0.1:4000", "addr:127.0.0.1:4000")
		for _, c := range []string{"10.0.0.1:1000", "10.0.0.2:1000", "127.0.0.1:4000"} {
			cc.closed(c)
		}
		synctest.Wait()
		if gone := g.take(); !slices.Equal(gone, []string{"addr:127.0.0.1:4000"}) {
			t.Fatalf("at the close: %v gone, want only the loopback connection's client", gone)
		}
		time.Sleep(4 * time.Second)
		cc.opened("10.0.0.1:1001") // token:a reconnects and calls within its grace
		cc.named("10.0.0.1:1001", "token:a")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if gone := g.take(); !slices.Equal(gone, []string{"addr:10.0.0.2"}) {
			t.Fatalf("after the grace: %v gone, want the client that did not come back", gone)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if gone := g.take(); len(gone) != 0 {
			t.Fatalf("the client that came back is reported gone: %v", gone)
		}
		cc.closed("10.0.0.1:1001")
		cc.stop()
		time.Sleep(time.Minute)
		synctest.Wait()
		if gone := g.take(); len(gone) != 0 {
			t.Fatalf("after stop: %v gone, want none", gone)
		}
	})
}
