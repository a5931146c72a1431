package store

import (
	"testing"

	"github.com/kvring/kvring/internal/testutil"
)

// mountTmpfs is testutil.MountTmpfs.
func mountTmpfs(t *testing.T, size string) string { return testutil.MountTmpfs(t, size) }
