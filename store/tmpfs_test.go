package store

import (
	"os"
	"testing"

	"github.com/kvring/kvring/internal/testutil"
)

// mountTmpfs is testutil.MountTmpfs.
func mountTmpfs(t *testing.T, size string) string { return testutil.MountTmpfs(t, size) }

// fillFile writes zeros to a new file at path until the filesystem is full
// (or limit bytes are written) and returns how many bytes it wrote. Only
// tests call it.
func fillFile(t *testing.T, path string, limit int64) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	var n int64
	for n < limit {
		m, err := f.Write(buf[:min(int64(len(buf)), limit-n)])
		n += int64(m)
		if err != nil {
			break
		}
	}
	return n
}
