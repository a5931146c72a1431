package launch

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// StartProcess starts cmd so that the process dies with its parent, however
// the parent ends (a failed test, a timeout's panic, SIGKILL): the kernel
// sends it SIGKILL when the parent dies (SysProcAttr.Pdeathsig). Every
// process the launcher starts goes through it, and testutil.Start (which
// the tests use for every other child) calls it too. Safe for concurrent
// use; blocks while the process is started.
//
// The kernel sends the signal when the thread that forked the child exits,
// not the process (go.dev/issue/27505), and the Go runtime ends a thread
// when a goroutine locked to it returns. So every child is forked on one
// thread that lives as long as the process: a goroutine that locks itself
// to its thread and never returns (goleak must ignore
// "github.com/kvring/kvring/internal/launch.starter").
func StartProcess(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	starterOnce.Do(func() {
		starts = make(chan startRequest)
		go starter(starts)
	})
	done := make(chan error)
	starts <- startRequest{cmd: cmd, done: done}
	return <-done
}

// ProcessGone reports whether process pid has exited: it has no entry in
// /proc, or it is a zombie that its parent (or, for an orphan, a reaper
// that may never reap it) has not waited for yet.
func ProcessGone(pid int) bool {
	s := processState(pid)
	return s == 0 || s == 'Z' || s == 'X'
}

// processState is the state letter of process pid in /proc (R, S, T, Z,
// ...), 0 when it has no entry.
func processState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// "pid (comm) S ...", where comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

type startRequest struct {
	cmd  *exec.Cmd
	done chan<- error
}

// The one starter thread of the process: package-level because Pdeathsig
// belongs to a thread, and a process has one set of threads.
var (
	starterOnce sync.Once
	starts      chan startRequest
)

// starter forks every child on its own thread, which it never gives back:
// the goroutine never returns, so the thread is never ended and no child's
// Pdeathsig fires before the process exits.
func starter(reqs <-chan startRequest) {
	runtime.LockOSThread()
	for r := range reqs {
		r.done <- r.cmd.Start()
	}
}
