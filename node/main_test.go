package node

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kvring/kvring/internal/testutil"
)

// TestMain runs the package's tests in a scratch directory (testutil.Scratch)
// and fails the package when they leave a goroutine running. A
// memberlist probe started just before Shutdown is the exception (as in
// node/membership): memberlist does not wait for it, and it ends by itself
// within the probe interval.
func TestMain(m *testing.M) {
	s := testutil.NewScratch()
	goleak.VerifyTestMain(m, goleak.Cleanup(s.Exit), testutil.IgnoreStarter, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}
