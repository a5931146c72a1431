package testutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ScratchPrefix starts the name of every scratch directory, in the
// temporary directory and in /dev/shm. python/tests/cluster.py makes and
// sweeps its own the same way.
const ScratchPrefix = "kvring-run-"

// ownerLock is the file in a scratch directory that its owner holds an
// exclusive flock on for as long as it runs. The kernel drops the lock when
// the owner dies, however it dies, so a sweep can tell a dead run's
// directory from a live one's by taking the lock, across pid namespaces and
// pid reuse.
const ownerLock = "owner.lock"

// staleAfter is how old a scratch directory without its lock file must be
// before a sweep takes it for a dead run's: its owner creates the lock just
// after the directory.
const staleAfter = time.Minute

// Scratch is where one test binary's files go: a directory in the temporary
// directory, which becomes $TMPDIR and $GOTMPDIR (so t.TempDir, os.MkdirTemp
// and the children's temporary files land in it), and one in /dev/shm for
// segment directories (ShmDir). Both are removed when the tests end (Exit),
// by a janitor process when the test binary is killed before that (a
// timeout's panic, SIGKILL), and by the next run's sweep when even the
// janitor was killed.
//
// A package's TestMain makes one before the tests run:
//
//	func TestMain(m *testing.M) {
//		s := testutil.NewScratch()
//		s.Exit(m.Run())
//	}
//
// or, with goleak, passes goleak.Cleanup(s.Exit) to goleak.VerifyTestMain.
// There is one scratch per process; Scratch is not for concurrent use, but
// ShmDir is.
type Scratch struct {
	tmp, shm string
	locks    []*os.File
	janitor  io.Closer // its stdin: the janitor cleans up when it closes
}

// current is the process's scratch, read by ShmDir.
var current *Scratch

// NewScratch sweeps the scratch directories of dead runs, makes this run's
// and points $TMPDIR and $GOTMPDIR at it. It panics when it cannot make
// them: no test could run.
func NewScratch() *Scratch {
	if current != nil {
		panic("BUG: testutil.NewScratch called twice")
	}
	base := os.TempDir()
	Sweep(base)
	Sweep("/dev/shm")
	s := &Scratch{}
	var err error
	if s.tmp, err = s.makeDir(base); err != nil {
		panic(fmt.Sprintf("cannot make a scratch directory in %q: %v", base, err))
	}
	if s.shm, err = s.makeDir("/dev/shm"); err != nil {
		s.shm = "" // no /dev/shm: ShmDir falls back to the temporary directory
	}
	s.startJanitor()
	os.Setenv("TMPDIR", s.tmp)
	os.Setenv("GOTMPDIR", s.tmp)
	current = s
	return s
}

// makeDir makes a scratch directory in parent and takes its owner lock.
func (s *Scratch) makeDir(parent string) (string, error) {
	dir, err := os.MkdirTemp(parent, ScratchPrefix)
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(filepath.Join(dir, ownerLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("cannot lock %q: %w", dir, err)
	}
	s.locks = append(s.locks, f)
	return dir, nil
}

// janitorScript waits until its standard input closes (the test binary
// exited, however) and removes the directories it was given; it ignores the
// signals a terminal or a make sends its process group, and tries again
// while children killed at the same moment still write into them.
const janitorScript = `trap '' HUP INT QUIT TERM PIPE
cat >/dev/null
for i in 1 2 3 4 5; do rm -rf -- "$@" 2>/dev/null && exit 0; sleep 1; done`

// startJanitor starts the janitor (without Pdeathsig: it must outlive the
// test binary). When it cannot, the next run's sweep is the only safety net.
func (s *Scratch) startJanitor() {
	dirs := []string{s.tmp}
	if s.shm != "" {
		dirs = append(dirs, s.shm)
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", janitorScript, "kvring-test-janitor"}, dirs...)...)
	cmd.Dir = "/"
	in, err := cmd.StdinPipe()
	if err != nil {
		return
	}
	if err := cmd.Start(); err != nil {
		in.Close()
		return
	}
	// Not waited for: a goroutine in Wait would outlive the tests (goleak),
	// and the janitor exits only after the test binary.
	s.janitor = in
}

// Dir is this run's directory in the temporary directory ($TMPDIR).
func (s *Scratch) Dir() string { return s.tmp }

// ShmRoot is this run's directory in /dev/shm, "" when there is none.
func (s *Scratch) ShmRoot() string { return s.shm }

// Exit removes the scratch directories and exits with code. Children
// started with Start that are still running die with the process.
func (s *Scratch) Exit(code int) {
	for _, dir := range []string{s.tmp, s.shm} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	if s.janitor != nil {
		s.janitor.Close()
	}
	os.Exit(code)
}

// ShmDir makes a directory for a store's segments in this run's /dev/shm
// scratch directory (in the temporary one when there is no /dev/shm), named
// after prefix, and removes it when the test ends. The package's TestMain
// must have made a Scratch. Safe for concurrent use.
func ShmDir(t testing.TB, prefix string) string {
	t.Helper()
	if current == nil {
		t.Fatal("BUG: testutil.ShmDir needs a testutil.NewScratch in the package's TestMain")
	}
	if current.shm == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(current.shm, prefix)
	if err != nil {
		t.Fatalf("cannot make a /dev/shm directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// SocketDir makes a directory with a short path for Unix sockets (a
// socket's path has at most 107 bytes, and t.TempDir's holds the test's
// name) in the temporary directory, and removes it when the test ends.
func SocketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatalf("cannot make a socket directory: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Sweep removes the scratch directories in parent whose owner is dead: their
// owner lock can be taken, or they have none and are older than a minute.
// It touches nothing else. Errors are ignored: a directory it cannot remove
// is left to the next sweep.
func Sweep(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), ScratchPrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if ownerDead(dir) {
			os.RemoveAll(dir)
		}
	}
}

// ownerDead reports whether the run that made the scratch directory dir has
// ended.
func ownerDead(dir string) bool {
	f, err := os.Open(filepath.Join(dir, ownerLock))
	if errors.Is(err, os.ErrNotExist) {
		info, err := os.Stat(dir)
		return err == nil && time.Since(info.ModTime()) > staleAfter
	}
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	return err == nil
}
