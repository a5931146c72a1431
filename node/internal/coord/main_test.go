package coord

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kvring/kvring/internal/testutil"
)

// TestMain runs the package's tests in a scratch directory (testutil.Scratch)
// and fails the package when they leave a goroutine running: a write
// starts goroutines only within its call.
func TestMain(m *testing.M) {
	s := testutil.NewScratch()
	goleak.VerifyTestMain(m, goleak.Cleanup(s.Exit), testutil.IgnoreStarter)
}
