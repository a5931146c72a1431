package membership

import (
	"fmt"
	"log"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// countingTransport is memberlist's own network transport, counting the
// gossip bytes this node puts on the wire: every packet it sends (UDP) and
// both directions of every stream it opens (TCP push-pull and fallback
// probes). Streams peers open are counted by them, so the sum over the
// members counts each byte once. Safe for concurrent use.
type countingTransport struct {
	*memberlist.NetTransport
	sent *atomic.Uint64
}

var _ memberlist.NodeAwareTransport = (*countingTransport)(nil)

// newCountingTransport binds memberlist's transport on addr:port as
// memberlist.Create would (port 0: a port the kernel picks, with retries,
// since UDP and TCP must both get it), counting into sent.
func newCountingTransport(addr string, port int, logger *log.Logger, sent *atomic.Uint64) (*countingTransport, error) {
	limit := 1
	if port == 0 {
		limit = 10
	}
	var err error
	for range limit {
		var nt *memberlist.NetTransport
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{addr}, BindPort: port, Logger: logger})
		if err == nil {
			return &countingTransport{NetTransport: nt, sent: sent}, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, fmt.Errorf("cannot bind the gossip transport: %w", err)
}

// WriteTo sends a packet, counting it.
func (t *countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	t.sent.Add(uint64(len(b)))
	return t.NetTransport.WriteTo(b, addr)
}

// WriteToAddress sends a packet, counting it.
func (t *countingTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	t.sent.Add(uint64(len(b)))
	return t.NetTransport.WriteToAddress(b, a)
}

// DialTimeout opens a stream whose bytes are counted.
func (t *countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := t.NetTransport.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, n: t.sent}, nil
}

// DialAddressTimeout opens a stream whose bytes are counted.
func (t *countingTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	c, err := t.NetTransport.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, n: t.sent}, nil
}

// countingConn counts the bytes read and written.
type countingConn struct {
	net.Conn
	n *atomic.Uint64
}

func (c countingConn) Read(b []byte) (int, error) {
	k, err := c.Conn.Read(b)
	c.n.Add(uint64(max(k, 0)))
	return k, err
}

func (c countingConn) Write(b []byte) (int, error) {
	k, err := c.Conn.Write(b)
	c.n.Add(uint64(max(k, 0)))
	return k, err
}
