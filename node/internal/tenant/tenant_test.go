package tenant

import (
	"net"
	"testing"
)

// TestOnlyALoopbackConnectionsNameIsPerConnection: the name of a loopback
// caller without a token carries its port, so no later connection can
// carry it; a token's or a remote address's name can come back.
func TestOnlyALoopbackConnectionsNameIsPerConnection(t *testing.T) {
	for _, c := range []struct {
		addr  net.Addr
		token string
		want  bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000}, "", true},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 4000}, "", true},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 4000}, "", false},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 4000}, "", false},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000}, "secret", false},
	} {
		name := Name(c.token, c.addr)
		if got := PerConnection(name); got != c.want {
			t.Errorf("PerConnection(%q) = %v, want %v", name, got, c.want)
		}
	}
	if PerConnection("local-socket") || PerConnection("") {
		t.Error("a name of no address is per connection")
	}
}
