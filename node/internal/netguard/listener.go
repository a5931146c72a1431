package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
)

// Limits caps the connections a guarded listener lets in. A connection past
// a cap is closed as soon as it is accepted (the client sees the connection
// end before any reply) and counted in kvring_connections_refused_total.
type Limits struct {
	// MaxConns is the most connections open at once through the listener.
	// 0: no cap.
	MaxConns int
	// MaxConnsPerAddr is the most connections open at once from one remote
	// IP address (all ports). 0: no cap. It applies only to listeners whose
	// remote addresses are IP addresses (TCP).
	MaxConnsPerAddr int
}

// Backoff bounds of a starved listener's retries: the first wait is
// minBackoff, each next one twice the last, at most maxBackoff.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

// probeWait is how long a starved listener, after its backoff, waits in
// accept for a connection before it concludes that nothing is queued and
// that it could accept one (it is then no longer starved).
const probeWait = time.Millisecond

// Listener is a guarded net.Listener (see the package documentation). Its
// Accept blocks like the wrapped listener's and returns only the errors that
// end a server loop (the listener was closed); Close closes the wrapped
// listener and ends a backoff in progress. One goroutine calls Accept at a
// time (as servers do); Close and Addr are safe for concurrent use.
type Listener struct {
	net.Listener
	g    *Guard
	name string
	lim  Limits
	// deadline is the wrapped listener's SetDeadline, nil when it has none:
	// a starved listener then asks probe whether a descriptor can be had.
	deadline func(time.Time) error
	probe    func() error
	done     chan struct{}
	once     sync.Once

	mu       sync.Mutex
	open     int
	perAddr  map[netip.Addr]int
	refusing bool // the last connection was refused (logged once per run of refusals)
}

// Wrap guards l under name ("grpc", "admin", "localsock": the listener label
// of the metrics) with the caps lim. With no cap set, Accept returns the
// wrapped listener's connections themselves (a *net.UnixConn stays one).
func (g *Guard) Wrap(name string, l net.Listener, lim Limits) *Listener {
	gl := &Listener{Listener: l, g: g, name: name, lim: lim, probe: probeDescriptor, done: make(chan struct{}),
		perAddr: make(map[netip.Addr]int)}
	if d, ok := l.(interface{ SetDeadline(time.Time) error }); ok {
		gl.deadline = d.SetDeadline
	}
	return gl
}

// Accept returns the next connection within the caps. While accepting fails
// for want of descriptors or memory it backs off and retries (see the
// package documentation); connections over a cap are closed and skipped.
func (l *Listener) Accept() (net.Conn, error) {
	var backoff time.Duration
	probing := false
	for {
		c, err := l.Listener.Accept()
		if probing {
			probing = false
			l.deadline(time.Time{})
			if isTimeout(err) { // nothing queued, and nothing failed: descriptors are there again
				l.g.setStarved(l.name, nil)
				continue
			}
		}
		if err != nil {
			if !resourceError(err) {
				return nil, err
			}
			l.g.acceptErrors.WithLabelValues(l.name).Inc()
			l.g.setStarved(l.name, err)
			if l.shed() {
				continue
			}
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
			if !l.sleep(backoff) {
				l.g.setStarved(l.name, nil)
				return nil, fmt.Errorf("cannot accept on %s: %w", l.name, net.ErrClosed)
			}
			if l.deadline != nil && l.deadline(time.Now().Add(probeWait)) == nil {
				probing = true
			} else if l.probe() == nil {
				l.g.setStarved(l.name, nil)
			}
			continue
		}
		backoff = 0
		l.g.setStarved(l.name, nil)
		if cc, ok := l.admit(c); ok {
			return cc, nil
		}
	}
}

// shed refuses the oldest connection queued on a listener that has no
// descriptor for it: it gives up the Guard's reserve descriptor, accepts
// with it (waiting probeWait at most), closes what it accepted and takes
// the reserve back. It reports whether a connection was shed; false also
// without a reserve or a deadline to bound the accept.
func (l *Listener) shed() bool {
	if l.deadline == nil || !l.g.spare.release() {
		return false
	}
	defer l.g.spare.restore()
	if l.deadline(time.Now().Add(probeWait)) != nil {
		return false
	}
	c, err := l.Listener.Accept()
	l.deadline(time.Time{})
	if err != nil {
		return false
	}
	c.Close()
	l.g.refused.WithLabelValues(l.name, "descriptors").Inc()
	return true
}

// sleep waits d; false when the listener was closed meanwhile.
func (l *Listener) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.done:
		return false
	case <-t.C:
		return true
	}
}

// Close closes the wrapped listener and ends a backoff in progress. The
// listener is no longer counted as starved.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	err := l.Listener.Close()
	l.g.setStarved(l.name, nil)
	return err
}

// Open returns the number of connections open through the listener (only
// counted when a cap is set).
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// admit counts c against the caps and returns it wrapped so that its Close
// uncounts it, or closes it and returns false when a cap is reached.
func (l *Listener) admit(c net.Conn) (net.Conn, bool) {
	if l.lim == (Limits{}) {
		return c, true
	}
	var ip netip.Addr
	if l.lim.MaxConnsPerAddr > 0 {
		ip = remoteIP(c)
	}
	l.mu.Lock()
	var which string
	switch {
	case l.lim.MaxConns > 0 && l.open >= l.lim.MaxConns:
		which = "node"
	case ip.IsValid() && l.perAddr[ip] >= l.lim.MaxConnsPerAddr:
		which = "addr"
	}
	warn := which != "" && !l.refusing
	l.refusing = which != ""
	if which == "" {
		l.open++
		if ip.IsValid() {
			l.perAddr[ip]++
		}
	}
	open, fromAddr := l.open, l.perAddr[ip]
	l.mu.Unlock()
	if which == "" {
		return &conn{Conn: c, l: l, ip: ip}, true
	}
	l.g.refused.WithLabelValues(l.name, which).Inc()
	if warn {
		l.g.log.Warn("connections refused: a connection cap is reached (logged once per run of refusals)", "listener", l.name,
			"cap", which, "remote", c.RemoteAddr().String(), "open", open, "open_from_addr", fromAddr,
			"max_conns", l.lim.MaxConns, "max_conns_per_addr", l.lim.MaxConnsPerAddr)
	}
	c.Close()
	return nil, false
}

// release uncounts a connection that closed.
func (l *Listener) release(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if ip.IsValid() {
		if l.perAddr[ip]--; l.perAddr[ip] <= 0 {
			delete(l.perAddr, ip)
		}
	}
}

// conn is an admitted connection; its first Close uncounts it.
type conn struct {
	net.Conn
	l    *Listener
	ip   netip.Addr
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}

// remoteIP is the IP address c comes from (invalid when it is not an IP
// connection).
func remoteIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// resourceError reports whether an accept failed for want of descriptors
// or kernel memory: the connection waits in the queue, and a later accept
// may succeed.
func resourceError(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// probeDescriptor opens and closes /dev/null: nil when the process can
// have one more descriptor.
func probeDescriptor() error {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	return f.Close()
}
