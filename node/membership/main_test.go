package membership

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when its tests leave a goroutine running. A
// memberlist probe started just before Shutdown is the exception: memberlist
// does not wait for it, and it ends by itself within the probe interval
// (waiting for its ack's timeout), which under load is longer than goleak
// looks.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}
