package node

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when its tests leave a goroutine running. A
// memberlist probe started just before Shutdown is the exception (as in
// node/membership): memberlist does not wait for it, and it ends by itself
// within the probe interval.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}
