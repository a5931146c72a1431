package client

import (
	"context"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"
)

// memNet is an in-memory network for tests in a synctest bubble, where real sockets do not fit: a goroutine blocked
// on a socket is not durably blocked, so the bubble's fake clock would stall. Nodes listen on bufconn listeners
// under made-up addresses; dialing an address nobody listens on is refused at once, like a closed TCP port. Create
// it, and everything that uses it, inside the bubble. Safe for concurrent use.
type memNet struct {
	mu        sync.Mutex
	listeners map[string]*memListener
}

// dialOption makes a client dial through the network. The client still validates its seeds as host:port and
// resolves them as gRPC does; only the dial is in memory.
func (n *memNet) dialOption() grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		n.mu.Lock()
		l := n.listeners[addr]
		n.mu.Unlock()
		if l == nil {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
		return l.DialContext(ctx)
	})
}

// listen returns a listener at addr, which must be free.
func (n *memNet) listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners == nil {
		n.listeners = map[string]*memListener{}
	}
	if n.listeners[addr] != nil {
		t.Fatalf("memNet: %s is in use", addr)
	}
	l := &memListener{Listener: bufconn.Listen(1 << 20), net: n, addr: addr}
	n.listeners[addr] = l
	return l
}

// memListener is a bufconn listener that leaves the network when closed.
type memListener struct {
	*bufconn.Listener
	net  *memNet
	addr string
}

func (l *memListener) Close() error {
	l.net.mu.Lock()
	if l.net.listeners[l.addr] == l {
		delete(l.net.listeners, l.addr)
	}
	l.net.mu.Unlock()
	return l.Listener.Close()
}

// Addr names the listener by its address on the network.
func (l *memListener) Addr() net.Addr { return memAddr(l.addr) }

type memAddr string

func (a memAddr) Network() string { return "memnet" }
func (a memAddr) String() string  { return string(a) }

// startNode serves hs (the standard health server, SERVING, when nil) at addr until killed or the test ends.
// Killing the node closes its listener first, so that dialing it again is refused, then every connection.
func (n *memNet) startNode(t *testing.T, addr string, hs healthpb.HealthServer) *testNode {
	t.Helper()
	node := &testNode{addr: addr, srv: grpc.NewServer(), lis: n.listen(t, addr)}
	if hs == nil {
		node.health = health.NewServer()
		hs = node.health
	}
	healthpb.RegisterHealthServer(node.srv, hs)
	go func() { _ = node.srv.Serve(node.lis) }()
	t.Cleanup(node.kill)
	return node
}

// newConn starts a conn (newTestConn) that dials through the network.
func (n *memNet) newConn(t *testing.T, change func(*ConnConfig), seeds ...string) *testConn {
	t.Helper()
	return newTestConn(t, func(cfg *ConnConfig) {
		cfg.DialOptions = append(cfg.DialOptions, n.dialOption())
		if change != nil {
			change(cfg)
		}
	}, seeds...)
}

// connectedTo starts a node and a conn to it and lets the fake clock run until they are connected.
func (n *memNet) connectedTo(t *testing.T, change func(*ConnConfig)) (*testConn, *testNode) {
	t.Helper()
	node := n.startNode(t, "10.0.0.1:9600", nil)
	c := n.newConn(t, change, node.addr)
	within(t, 5*time.Second, "connected", func() bool { return c.State().Status == ConnConnected })
	return c, node
}

// within lets a synctest bubble's fake clock run, in small steps, until cond holds, and returns how much of it
// passed. It fails the test when cond still does not hold after limit of fake time. Each step first lets every
// goroutine of the bubble run until it blocks (synctest.Wait), so the time returned is exact to the step and the
// steps cost no real time. Only for tests inside a bubble.
func within(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	const step = time.Millisecond
	start := time.Now()
	for {
		synctest.Wait()
		if cond() {
			return time.Since(start)
		}
		if time.Since(start) >= limit {
			t.Fatalf("%s did not happen within %s of the bubble's clock", what, limit)
		}
		time.Sleep(step) // the fake clock: costs no real time
	}
}
