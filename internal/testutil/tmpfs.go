package testutil

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// MountTmpfs mounts a tmpfs of the given size ("16m") on a fresh directory
// and unmounts it when the test ends, after whatever the test opened on it
// has closed (cleanups run last-registered first). It skips the test, saying
// why, when the process may not mount (not root, or no CAP_SYS_ADMIN); CI
// runs as root.
func MountTmpfs(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs of a fixed size (CI runs as root)")
	}
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a %s tmpfs on %s: %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			// Something still holds a file open: detach it so that the
			// mount goes away with the last descriptor.
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				t.Errorf("cannot unmount the tmpfs on %s: %v", dir, err)
			}
		}
	})
	return dir
}

// FillFile writes zeros to a new file at path until its filesystem is full
// (or limit bytes are written) and returns how many bytes it wrote.
func FillFile(t testing.TB, path string, limit int64) int64 {
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
