package node

import (
	"sync"
)

// clientConns knows, for every open gRPC connection, the clients its Cache
// calls named (clientNamer), so that when a client's last connection
// closes the node can end what that client held only for as long as it is
// there: its lookup leases (coord.Coordinator.ClientGone). A client named
// by its token may use many connections; one named by its address or its
// loopback connection uses the connections of that address. Connections are
// keyed by their remote address (ip:port), unique while they are open.
// Safe for concurrent use; named is on every Cache call's path and takes a
// read lock only, once a connection has named its client.
type clientConns struct {
	mu sync.RWMutex
	// conns maps each open connection to the clients named on it.
	conns map[string]map[string]struct{}
	// open counts, per client, the open connections that named it.
	open map[string]int
}

func newClientConns() *clientConns {
	return &clientConns{conns: map[string]map[string]struct{}{}, open: map[string]int{}}
}

// opened records a connection the listener accepted.
func (t *clientConns) opened(conn string) {
	t.mu.Lock()
	t.conns[conn] = map[string]struct{}{}
	t.mu.Unlock()
}

// named records that a call on conn named client. A connection not open
// (closed already, or not accepted by the watched listener) records
// nothing, so nothing is kept for it past its end.
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
}

// closed forgets conn and returns the clients it was the last open
// connection of.
func (t *clientConns) closed(conn string) (gone []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for client := range t.conns[conn] {
		if t.open[client]--; t.open[client] <= 0 {
			delete(t.open, client)
			gone = append(gone, client)
		}
	}
	delete(t.conns, conn)
	return gone
}
