package launch

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestAHeldPortRefusesConnectionsAndLetsItsOwnerListen: the two properties
// the e2e tests rely on when they keep a stopped node's port.
func TestAHeldPortRefusesConnectionsAndLetsItsOwnerListen(t *testing.T) {
	t.Parallel()
	h, err := HoldPort("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Port() == 0 {
		t.Fatalf("held %s: no port chosen", h.Addr())
	}
	if _, err := net.Dial("tcp", h.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to a held port: %v, want connection refused", err)
	}
	l, err := net.Listen("tcp", h.Addr())
	if err != nil {
		t.Fatalf("listening on a held port: %v", err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", h.Addr())
	if err != nil {
		t.Fatalf("dial to the listener beside the hold: %v", err)
	}
	c.Close()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
