package testutil

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"go.uber.org/goleak"
)

// Start starts cmd so that the process dies with the test binary, however
// the test binary ends (a failed test, a timeout's panic, SIGKILL): the
// kernel sends it SIGKILL when its parent dies (SysProcAttr.Pdeathsig).
// Every process a test starts (a node, a CLI run, a build, redis-server)
// goes through Start, Run or CombinedOutput, so that no test leaves one
// running. Safe for concurrent use; blocks while the process is started.
//
// The kernel sends the signal when the thread that forked the child exits,
// not the process (go.dev/issue/27505), and the Go runtime ends a thread
// when a goroutine locked to it returns. So every child is forked on one
// thread that lives as long as the process: a goroutine that locks itself
// to its thread and never returns (IgnoreStarter names it for goleak).
func Start(cmd *exec.Cmd) error {
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

// Run starts cmd as Start does and waits for it to exit, as cmd.Run.
func Run(cmd *exec.Cmd) error {
	if err := Start(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}

// CombinedOutput runs cmd as Run does and returns its standard output and
// standard error together, as cmd.CombinedOutput.
func CombinedOutput(cmd *exec.Cmd) ([]byte, error) {
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := Run(cmd)
	return b.Bytes(), err
}

// IgnoreStarter tells goleak.VerifyTestMain that the goroutine Start forks
// children from is meant to outlive the tests.
var IgnoreStarter = goleak.IgnoreAnyFunction("github.com/kvring/kvring/internal/testutil.starter")

// ProcessGone reports whether process pid has exited: it has no entry in
// /proc, or it is a zombie that its parent (or, for an orphan, a reaper
// that may never reap it) has not waited for yet.
func ProcessGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// "pid (comm) S ...", where comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

type startRequest struct {
	cmd  *exec.Cmd
	done chan<- error
}

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
