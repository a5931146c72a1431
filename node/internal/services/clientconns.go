package services

import (
	"sync"
	"time"

	"github.com/kvring/kvring/node/internal/tenant"
)

// clientConns knows, for every open gRPC connection, the clients its Cache
// calls named (clientNamer), so that when a client's last connection
// closes the node can end what that client held only for as long as it is
// there: its lookup leases (gone, coord.Coordinator.ClientGone). A client
// named by its token may use many connections; one named by its address or
// its loopback connection uses the connections of that address.
// Connections are keyed by their remote address (ip:port), unique while
// they are open.
//
// A client whose name can outlive a connection (a token, a remote address)
// is gone only once grace has passed without a call naming it on any
// connection: a client that reconnects at once (a network blip, a
// connection the server closed for its age) keeps its leases. A client
// named by its loopback connection cannot come back under that name, so it
// is gone at once. The grace timers are the clientConns's own: stop ends
// them and waits for any that fired.
//
// Safe for concurrent use; named is on every Cache call's path and takes a
// read lock only, once a connection has named its client.
type clientConns struct {
	grace time.Duration // <= 0: gone at once
	gone  func(client string)

	mu sync.RWMutex
	// conns maps each open connection to the clients named on it.
	conns map[string]map[string]struct{}
	// open counts, per client, the open connections that named it.
	open map[string]int
	// later holds the grace timer of each client whose last connection
	// closed; a call naming it stops the timer.
	later   map[string]*time.Timer
	stopped bool
	fired   sync.WaitGroup // the timers' calls of gone
}

// newClientConns returns a clientConns that calls gone (which must not
// block) with each client that has gone for good: grace after its last
// connection closed, or at once.
func newClientConns(grace time.Duration, gone func(client string)) *clientConns {
	return &clientConns{grace: grace, gone: gone, conns: map[string]map[string]struct{}{}, open: map[string]int{},
		later: map[string]*time.Timer{}}
}

// opened records a connection the listener accepted.
func (t *clientConns) opened(conn string) {
	t.mu.Lock()
	t.conns[conn] = map[string]struct{}{}
	t.mu.Unlock()
}

// named records that a call on conn named client. A connection not open
// (closed already, or not accepted by the watched listener) records
// nothing, so nothing is kept for it past its end. A client within its
// grace is back: it keeps what it held.
func (t *clientConns) named(conn, client string) {
	if client == "" {
		return
	}
	t.mu.RLock()
	clients, ok := t.conns[conn]
	_, seen := clients[client]
	t.mu.RUnlock()
	if !ok || seen {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	clients, ok = t.conns[conn]
	if _, seen := clients[client]; !ok || seen {
		return
	}
	clients[client] = struct{}{}
	t.open[client]++
	if tm, ok := t.later[client]; ok {
		tm.Stop()
		delete(t.later, client)
	}
}

// closed forgets conn; each client it was the last open connection of is
// gone, at once or after the grace.
func (t *clientConns) closed(conn string) {
	var now []string
	t.mu.Lock()
	for client := range t.conns[conn] {
		if t.open[client]--; t.open[client] > 0 {
			continue
		}
		delete(t.open, client)
		if t.grace <= 0 || tenant.PerConnection(client) || t.stopped {
			now = append(now, client)
			continue
		}
		if _, ok := t.later[client]; !ok {
			t.later[client] = time.AfterFunc(t.grace, func() { t.expire(client) })
		}
	}
	delete(t.conns, conn)
	t.mu.Unlock()
	for _, client := range now {
		t.gone(client)
	}
}

// expire is client's grace timer: the client is gone unless it came back
// or the clientConns stopped.
func (t *clientConns) expire(client string) {
	t.mu.Lock()
	if _, ok := t.later[client]; !ok || t.stopped {
		t.mu.Unlock()
		return
	}
	delete(t.later, client)
	t.fired.Add(1)
	t.mu.Unlock()
	defer t.fired.Done()
	t.gone(client)
}

// stop ends the grace timers (their clients are not reported gone: the
// node is closing, and its leases with it) and waits for those that fired.
func (t *clientConns) stop() {
	t.mu.Lock()
	t.stopped = true
	for client, tm := range t.later {
		tm.Stop()
		delete(t.later, client)
	}
	t.mu.Unlock()
	t.fired.Wait()
}
