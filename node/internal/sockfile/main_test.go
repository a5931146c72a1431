package sockfile

import (
	"testing"

	"github.com/kvring/kvring/internal/testutil"
)

// TestMain runs the package's tests in a scratch directory (testutil.Scratch).
func TestMain(m *testing.M) {
	s := testutil.NewScratch()
	s.Exit(m.Run())
}
