package main

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockDir holds one lock file per run, "<run>.lock", that the run's outer
// process holds an exclusive flock on from before it makes anything until
// after it has removed everything. The kernel drops the lock when that
// process dies, however it dies (SIGKILL too), so a run whose lock can be
// taken is dead, whatever its pid became, whatever its $TMPDIR and its pid
// namespace. It sits in /run beside /run/netns, and like the namespaces'
// names it does not outlive a reboot.
const lockDir = "/run/kvnf"

// stagingPrefix starts the name of a scratch directory while its pid file
// is written, before it is renamed to the run's id.
const stagingPrefix = ".new-"

// runLock is a live run's hold on its id. Not for concurrent use.
type runLock struct {
	run string
	f   *os.File
}

func lockPath(run string) string { return filepath.Join(lockDir, run+".lock") }

// claimRun picks a fresh run id and locks it: the lock file is created
// (never reused: a clash with any run's id, live or dead, draws another) and
// locked before the run makes anything.
func claimRun() (*runLock, error) {
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot make %s: %w", lockDir, err)
	}
	for range 8 {
		var b [4]byte
		if _, err := cryptorand.Read(b[:]); err != nil {
			return nil, err
		}
		run := prefix + hex.EncodeToString(b[:])
		f, err := os.OpenFile(lockPath(run), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot create the run's lock: %w", err)
		}
		// A sweep may open the file between its creation and this lock, take
		// the lock first and remove the file: then draw another id.
		if !lockAndCheck(f, lockPath(run)) {
			f.Close()
			continue
		}
		fmt.Fprintf(f, "%d\n", os.Getpid()) // for people; the lock is what counts
		return &runLock{run: run, f: f}, nil
	}
	return nil, errors.New("cannot claim a run id: 8 ids in a row were taken")
}

// octet is the third octet of the run's subnet, drawn with its id.
func (l *runLock) octet() byte {
	b, _ := hex.DecodeString(strings.TrimPrefix(l.run, prefix))
	return b[0]%200 + 20
}

// release removes the lock file and drops the lock; the run must have
// removed everything else first.
func (l *runLock) release() {
	os.Remove(lockPath(l.run))
	l.f.Close()
}

// lockAndCheck takes f's flock without waiting and reports whether it got
// it on the file that path still names.
func lockAndCheck(f *os.File, path string) bool {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false
	}
	held, err1 := f.Stat()
	now, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(held, now)
}

// makeRunDir makes the run's scratch directory with its pid file already in
// it (written in a staging directory, then renamed): harness versions
// before the run locks take a scratch directory without a live pid file for
// a dead run's and remove it.
func makeRunDir(dir string) error {
	staging, err := os.MkdirTemp(filepath.Dir(dir), stagingPrefix+filepath.Base(dir)+"-")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(staging, "pid"), fmt.Appendf(nil, "%d\n", os.Getpid()), 0o600); err != nil {
		os.RemoveAll(staging)
		return err
	}
	if err := os.Rename(staging, dir); err != nil {
		os.RemoveAll(staging)
		return err
	}
	return nil
}

// runOf returns the run id a name the harness made starts with.
func runOf(name string) string {
	return strings.SplitN(strings.TrimPrefix(name, stagingPrefix), "-", 2)[0]
}

// ofRun reports whether name (of a namespace or a /dev/shm directory) is
// run r's.
func ofRun(name, r string) bool { return name == r || strings.HasPrefix(name, r+"-") }

// sweepStale removes what runs that are dead left behind: their namespaces
// (with any process still in them), /dev/shm directories, scratch
// directories in tmp and lock files. A run is dead when its lock can be
// taken; one without a lock file (made by a harness from before the locks)
// when its pid file in tmp does not name a live process and no process is
// in its namespaces. A live run's things are never touched.
func sweepStale(ctx context.Context, tmp string) error {
	out, err := run(ctx, "ip", "netns", "list")
	if err != nil {
		return err
	}
	var namespaces []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			namespaces = append(namespaces, f[0])
		}
	}
	runs := map[string]bool{}
	for _, ns := range namespaces {
		runs[runOf(ns)] = true
	}
	for _, dir := range []string{"/dev/shm", tmp, lockDir} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(strings.TrimPrefix(e.Name(), stagingPrefix), prefix) {
				runs[strings.TrimSuffix(runOf(e.Name()), ".lock")] = true
			}
		}
	}
	var errs []error
	for _, r := range slices.Sorted(maps.Keys(runs)) {
		f, err := os.OpenFile(lockPath(r), os.O_RDWR, 0)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if legacyAlive(ctx, r, tmp, namespaces) {
				continue
			}
			if err := sweepRun(ctx, r, tmp); err != nil {
				errs = append(errs, err)
			}
		case err != nil:
			errs = append(errs, err)
		default:
			if lockAndCheck(f, lockPath(r)) {
				if err := sweepRun(ctx, r, tmp); err != nil {
					errs = append(errs, err)
				} else {
					os.Remove(lockPath(r))
				}
			}
			f.Close()
		}
	}
	return errors.Join(errs...)
}

// legacyAlive tells whether run r, which has no lock file, may be alive:
// its pid file in tmp names a live process other than this one, or a
// process is in one of its namespaces.
func legacyAlive(ctx context.Context, r, tmp string, namespaces []string) bool {
	if b, err := os.ReadFile(filepath.Join(tmp, r, "pid")); err == nil {
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == nil {
			return true
		}
	}
	for _, ns := range namespaces {
		if ofRun(ns, r) {
			if out, _ := run(ctx, "ip", "netns", "pids", ns); strings.TrimSpace(out) != "" {
				return true
			}
		}
	}
	return false
}

// sweepRun removes dead run r's namespaces (killing what is left in them),
// /dev/shm directories and scratch directories in tmp.
func sweepRun(ctx context.Context, r, tmp string) error {
	err := sweepNamespaces(ctx, func(ns string) bool { return ofRun(ns, r) })
	ents, _ := os.ReadDir("/dev/shm")
	for _, e := range ents {
		if ofRun(e.Name(), r) {
			os.RemoveAll(filepath.Join("/dev/shm", e.Name()))
		}
	}
	ents, _ = os.ReadDir(tmp)
	for _, e := range ents {
		if e.Name() == r || strings.HasPrefix(e.Name(), stagingPrefix+r+"-") {
			os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
	return err
}
