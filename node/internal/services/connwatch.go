package services

import (
	"net"
	"sync"

	"github.com/kvring/kvring/node/internal/metrics"
	"github.com/kvring/kvring/node/internal/owner"
)

// connWatch is the gRPC server's listener: it counts the connections it
// accepts and, when gRPC closes one (the peer went away, the server
// stopped), frees what that peer staged and did not commit
// (owner.ConnClosed) and ends the lookup leases of the clients it was the
// last connection of (clientConns, which calls coord.Coordinator.ClientGone
// after its grace). It
// replaces two gRPC stats handlers that wanted only connection events:
// with any stats handler gRPC builds an event, reads the clock and copies
// the metadata for every call and every message.
type connWatch struct {
	net.Listener
	m       *metrics.Set
	owner   *owner.Owner
	clients *clientConns
}

// Serve serves the node's gRPC services on lis, watched, until the server
// stops. It blocks.
func (s *Services) Serve(lis net.Listener) error {
	return s.GRPC.Serve(connWatch{Listener: lis, m: s.Metrics, owner: s.Owner, clients: s.clients})
}

// Accept returns the next connection, watched. It blocks like the
// listener's Accept.
func (l connWatch) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.m.Connections.Inc()
	l.m.ConnectionsTotal.Inc()
	l.clients.opened(c.RemoteAddr().String())
	return &watchedConn{Conn: c, l: l}, nil
}

// watchedConn reports its first Close to its listener.
type watchedConn struct {
	net.Conn
	l    connWatch
	once sync.Once
}

func (c *watchedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.m.Connections.Dec()
		c.l.owner.ConnClosed(c.Conn.RemoteAddr())
		c.l.clients.closed(c.Conn.RemoteAddr().String())
	})
	return err
}
