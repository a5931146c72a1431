package local

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when its tests leave a goroutine running. The
// client is exercised against a real server by node/internal/localsock's
// and node's tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
