package testutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain runs the package's tests in a scratch directory of their own.
func TestMain(m *testing.M) {
	s := NewScratch()
	s.Exit(m.Run())
}

// TestSweepRemovesOnlyTheScratchOfDeadRuns: a scratch directory whose owner
// lock is free (its run died) or that never got one and is old goes; a live
// run's (its lock held), a fresh one still being made and anything not named
// as a scratch directory stay.
func TestSweepRemovesOnlyTheScratchOfDeadRuns(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mk := func(name string, lock bool) string {
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if lock {
			if err := os.WriteFile(filepath.Join(dir, ownerLock), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	live := mk(ScratchPrefix+"live", true)
	f, err := os.Open(filepath.Join(live, ownerLock))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	dead := mk(ScratchPrefix+"dead", true)
	fresh := mk(ScratchPrefix+"fresh", false)
	old := mk(ScratchPrefix+"old", false)
	long := time.Now().Add(-2 * staleAfter)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	other := mk("kvring-e2e-123", true)
	os.Chtimes(other, long, long)

	Sweep(root)
	for dir, want := range map[string]bool{live: true, dead: false, fresh: true, old: false, other: true} {
		_, err := os.Stat(dir)
		if got := err == nil; got != want {
			t.Errorf("%s: there %v after the sweep, want %v", filepath.Base(dir), got, want)
		}
	}
}

// TestTheScratchIsTheTemporaryDirectory: t.TempDir, os.MkdirTemp and ShmDir
// all land in this run's scratch directories.
func TestTheScratchIsTheTemporaryDirectory(t *testing.T) {
	t.Parallel()
	s := current
	tmp, err := os.MkdirTemp("", "x-")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Dir(t.TempDir()), tmp} {
		if filepath.Dir(dir) != s.Dir() {
			t.Errorf("%s is not in the scratch directory %s", dir, s.Dir())
		}
	}
	if s.ShmRoot() == "" {
		t.Skip("no /dev/shm")
	}
	if dir := ShmDir(t, "x-"); filepath.Dir(dir) != s.ShmRoot() {
		t.Errorf("ShmDir made %s, not in %s", dir, s.ShmRoot())
	}
}
