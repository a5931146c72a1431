package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Each node keeps its segment files in a private directory under ShmDir,
// kvring-<node id>/, mode 0700, that this process locks while the store is
// open (the lock file .lock, flock). Files are created with
// O_EXCL|O_NOFOLLOW and mode 0600: nobody else needs path access (the local
// socket hands out descriptors), and a symlink planted at a segment's path
// is refused instead of followed.

// shmNodePrefix starts the name of every node's segment directory.
const shmNodePrefix = "kvring-"

// lockName is the lock file in a node's segment directory.
const lockName = ".lock"

// nodeShmDir is the segment directory of node under shmDir.
func nodeShmDir(shmDir, node string) string { return filepath.Join(shmDir, shmNodePrefix+node) }

// openNodeShmDir creates dir (0700) or checks that it is a directory (not a
// symlink) owned by this process's user that no one else may enter, and
// locks it for this process. The returned file holds the lock until closed.
// A directory another process has locked is an error naming it.
func openNodeShmDir(dir string) (*os.File, error) {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("cannot create segment directory %q: %w", dir, err)
	}
	if err := checkPrivateDir(dir); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot open the lock of segment directory %q: %w", dir, err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: segment directory %q is in use by another process (a node with the same data directory?)", ErrInvalid, dir)
		}
		return nil, fmt.Errorf("cannot lock segment directory %q: %w", dir, err)
	}
	return lock, nil
}

// checkPrivateDir refuses a segment directory that is a symlink, is not a
// directory, belongs to another user, or that others may read or write.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("cannot check segment directory %q: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: segment directory %q is a symlink; refusing to follow it", ErrInvalid, dir)
	case !fi.IsDir():
		return fmt.Errorf("%w: segment directory %q is not a directory", ErrInvalid, dir)
	case ok && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%w: segment directory %q belongs to uid %d, not to this process (uid %d)", ErrInvalid, dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%w: segment directory %q has mode %v; others must have no access (want 0700)", ErrInvalid, dir, fi.Mode().Perm())
	}
	return nil
}

// ShmNode is one node's segment directory under a shared-memory directory.
type ShmNode struct {
	// Node is the node id; Dir its segment directory.
	Node, Dir string
	// Files and Bytes count its segment files and the memory they hold.
	Files int
	Bytes int64
	// InUse: a running store holds the directory's lock; PID is its
	// process (0: unknown, or not in use).
	InUse bool
	PID   int
}

// ListShmNodes lists the nodes' segment directories under shmDir, with what
// they hold and whether a running store uses them. It does not block.
func ListShmNodes(shmDir string) ([]ShmNode, error) {
	entries, err := os.ReadDir(shmDir)
	if err != nil {
		return nil, fmt.Errorf("cannot list shared-memory directory %q: %w", shmDir, err)
	}
	var out []ShmNode
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), shmNodePrefix) {
			continue
		}
		n := ShmNode{Node: strings.TrimPrefix(e.Name(), shmNodePrefix), Dir: filepath.Join(shmDir, e.Name())}
		segs, _ := filepath.Glob(filepath.Join(n.Dir, "*.seg"))
		for _, p := range segs {
			var st unix.Stat_t
			if unix.Lstat(p, &st) == nil {
				n.Files++
				n.Bytes += st.Blocks * 512
			}
		}
		if n.InUse = dirLocked(n.Dir); n.InUse {
			n.PID = lockHolder(filepath.Join(n.Dir, lockName))
		}
		out = append(out, n)
	}
	return out, nil
}

// RemoveShmNode deletes the segment directory of node under shmDir, freeing
// the memory its chunks hold: for a node that will not come back. A
// directory a running store uses is refused with ErrInUse, naming the
// node's process when this host's /proc/locks shows it.
func RemoveShmNode(shmDir, node string) error {
	if node == "" || strings.ContainsAny(node, `/\`) || node == "." || node == ".." {
		return fmt.Errorf("%w: node id %q", ErrInvalid, node)
	}
	dir := nodeShmDir(shmDir, node)
	if err := checkPrivateDir(dir); err != nil {
		return err
	}
	if dirLocked(dir) {
		return inUse(dir, node)
	}
	lock, err := openNodeShmDir(dir)
	if errors.Is(err, ErrInvalid) && dirLocked(dir) { // it started meanwhile
		return inUse(dir, node)
	}
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("cannot remove segment directory %q: %w", dir, err)
	}
	return nil
}

// dirLocked reports whether a process holds the lock of segment directory
// dir.
func dirLocked(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return true
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// inUse is the error for removing the segments of a node that runs.
func inUse(dir, node string) error {
	running := "is running"
	if pid := lockHolder(filepath.Join(dir, lockName)); pid > 0 {
		running = fmt.Sprintf("is running (pid %d)", pid)
	}
	return fmt.Errorf("%w: node %s %s and holds segment directory %q; stop it first, then remove its segments",
		ErrInUse, node, running, dir)
}

// lockHolder returns the process that holds the flock of the file at path,
// as /proc/locks tells (in this process's pid namespace), or 0 when it
// cannot tell.
func lockHolder(path string) int {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	// "1: FLOCK  ADVISORY  WRITE 1721 00:1a:4688 0 EOF"; a waiter's line
	// has "->" after the number.
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	for _, line := range strings.Split(string(locks), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != file {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}
