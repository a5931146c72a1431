package node

import (
	"slices"
	"testing"
)

// TestAClientIsGoneWithItsLastConnection: a client named on two
// connections (one token, two connections) is gone only when both closed;
// a connection that was never opened, or closed already, keeps nothing.
func TestAClientIsGoneWithItsLastConnection(t *testing.T) {
	cc := newClientConns()
	cc.opened("10.0.0.1:1000")
	cc.opened("10.0.0.1:1001")
	cc.named("10.0.0.1:1000", "token:a")
	cc.named("10.0.0.1:1000", "token:a") // every call names it again
	cc.named("10.0.0.1:1001", "token:a")
	cc.named("10.0.0.1:1001", "addr:10.0.0.1")
	if gone := cc.closed("10.0.0.1:1000"); len(gone) != 0 {
		t.Fatalf("closing one of two connections: %v gone, want none", gone)
	}
	gone := cc.closed("10.0.0.1:1001")
	slices.Sort(gone)
	if !slices.Equal(gone, []string{"addr:10.0.0.1", "token:a"}) {
		t.Fatalf("closing the last connection: %v gone, want both clients", gone)
	}
	cc.named("10.0.0.1:1001", "token:a") // a call that raced the close
	cc.named("", "token:b")
	if len(cc.conns) != 0 || len(cc.open) != 0 {
		t.Fatalf("kept %d connections and %d clients after every connection closed", len(cc.conns), len(cc.open))
	}
}
