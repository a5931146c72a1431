package connpool_test

import (
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/kvring/kvring/internal/connpool"
	"github.com/kvring/kvring/transfer"
)

// TestMain fails the package when a test leaves a goroutine behind: every
// connection a pool created must be closed by Keep or Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Nothing listens on these addresses, and nothing needs to: a pool never
// dials by itself, and no test makes a call.
const (
	addrA = "127.0.0.1:1"
	addrB = "127.0.0.1:2"
	addrC = "127.0.0.1:3"
)

func newPool(t *testing.T) *connpool.Pool {
	t.Helper()
	p := connpool.New(grpc.WithTransportCredentials(insecure.NewCredentials()))
	t.Cleanup(p.Close)
	return p
}

func get(t *testing.T, p *connpool.Pool, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := p.Get(addr)
	if err != nil {
		t.Fatalf("Get(%s): %v", addr, err)
	}
	return cc
}

// TestGetReturnsOneConnectionPerAddressWithoutDialing: every Get of an
// address returns the same connection, another address gets another one,
// and none is dialed (it stays Idle until a call needs it).
func TestGetReturnsOneConnectionPerAddressWithoutDialing(t *testing.T) {
	t.Parallel()
	p := newPool(t)
	a := get(t, p, addrA)
	if again := get(t, p, addrA); again != a {
		t.Fatal("a second Get of the same address made another connection")
	}
	if b := get(t, p, addrB); b == a {
		t.Fatal("two addresses share a connection")
	}
	if a.Target() != addrA {
		t.Fatalf("Target() = %q, want %q", a.Target(), addrA)
	}
	if s := a.GetState(); s != connectivity.Idle {
		t.Fatalf("a connection nobody called is %s, want Idle: the pool dialed it", s)
	}
}

// TestGetFailsAsUnavailableWhenGRPCRefusesTheOptions: a connection gRPC
// cannot create is an error wrapping transfer.ErrUnavailable, not ErrClosed.
func TestGetFailsAsUnavailableWhenGRPCRefusesTheOptions(t *testing.T) {
	t.Parallel()
	p := connpool.New() // no transport credentials: grpc.NewClient refuses
	t.Cleanup(p.Close)
	cc, err := p.Get(addrA)
	if cc != nil || !errors.Is(err, transfer.ErrUnavailable) || errors.Is(err, connpool.ErrClosed) {
		t.Fatalf("Get: conn %t, err %v; want an Unavailable error, not ErrClosed", cc != nil, err)
	}
}

// TestKeepClosesTheConnectionsToAddressesNotLive: Keep shuts down exactly
// the connections to addresses outside live; a later Get of such an address
// gets a new connection.
func TestKeepClosesTheConnectionsToAddressesNotLive(t *testing.T) {
	t.Parallel()
	p := newPool(t)
	a, b, c := get(t, p, addrA), get(t, p, addrB), get(t, p, addrC)
	p.Keep(map[string]bool{addrB: true, "127.0.0.1:4": true})
	for _, cc := range []*grpc.ClientConn{a, c} {
		if s := cc.GetState(); s != connectivity.Shutdown {
			t.Errorf("connection to %s is %s after Keep without it, want Shutdown", cc.Target(), s)
		}
	}
	if s := b.GetState(); s == connectivity.Shutdown {
		t.Fatal("Keep closed a live address's connection")
	}
	if again := get(t, p, addrB); again != b {
		t.Fatal("Keep replaced a live address's connection")
	}
	if again := get(t, p, addrA); again == a || again.GetState() == connectivity.Shutdown {
		t.Fatal("Get after Keep handed out the closed connection")
	}
	p.Keep(nil)
	if s := b.GetState(); s != connectivity.Shutdown {
		t.Fatalf("Keep(nil) left a connection %s", s)
	}
}

// TestCloseClosesEverythingAndLaterGetsFail: Close shuts down every
// connection, Get then fails with ErrClosed (and transfer.ErrUnavailable),
// and Close and Keep may be called again.
func TestCloseClosesEverythingAndLaterGetsFail(t *testing.T) {
	t.Parallel()
	p := newPool(t)
	a, b := get(t, p, addrA), get(t, p, addrB)
	p.Close()
	for _, cc := range []*grpc.ClientConn{a, b} {
		if s := cc.GetState(); s != connectivity.Shutdown {
			t.Errorf("connection to %s is %s after Close, want Shutdown", cc.Target(), s)
		}
	}
	cc, err := p.Get(addrA)
	if cc != nil || !errors.Is(err, connpool.ErrClosed) || !errors.Is(err, transfer.ErrUnavailable) {
		t.Fatalf("Get after Close: conn %t, err %v; want an error wrapping ErrClosed and transfer.ErrUnavailable", cc != nil, err)
	}
	p.Close()
	p.Keep(map[string]bool{addrA: true})
	if _, err := p.Get(addrB); !errors.Is(err, connpool.ErrClosed) {
		t.Fatalf("Get after a second Close: %v", err)
	}
}

// TestConcurrentGetsShareOneConnectionAndCloseLeavesNoneOpen: Gets racing
// with each other, with Keep and with Close (run under -race) agree on one
// connection per address, and once Close returns every connection any of
// them got is shut down.
func TestConcurrentGetsShareOneConnectionAndCloseLeavesNoneOpen(t *testing.T) {
	t.Parallel()
	p := newPool(t)
	addrs := []string{addrA, addrB, addrC}
	var (
		mu  sync.Mutex
		got = map[string]map[*grpc.ClientConn]bool{}
		wg  sync.WaitGroup
	)
	record := func(addr string, cc *grpc.ClientConn) {
		mu.Lock()
		defer mu.Unlock()
		if got[addr] == nil {
			got[addr] = map[*grpc.ClientConn]bool{}
		}
		got[addr][cc] = true
	}
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				addr := addrs[(g+i)%len(addrs)]
				if cc, err := p.Get(addr); err == nil {
					record(addr, cc)
				}
			}
		})
	}
	wg.Wait()
	for _, addr := range addrs {
		if n := len(got[addr]); n != 1 {
			t.Fatalf("%d connections to %s, want 1", n, addr)
		}
	}

	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				addr := addrs[(g+i)%len(addrs)]
				switch {
				case g == 0 && i%10 == 0:
					p.Keep(map[string]bool{addrA: true})
				case g == 1 && i == 25:
					p.Close()
				}
				cc, err := p.Get(addr)
				if err != nil {
					if !errors.Is(err, connpool.ErrClosed) {
						t.Errorf("Get(%s): %v", addr, err)
					}
					continue
				}
				record(addr, cc)
			}
		})
	}
	wg.Wait()
	p.Close()
	for addr, ccs := range got {
		for cc := range ccs {
			if s := cc.GetState(); s != connectivity.Shutdown {
				t.Errorf("a connection to %s is %s after Close, want Shutdown", addr, s)
			}
		}
	}
}
